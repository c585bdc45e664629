// Package hook connects package eventbus/backend to the unexported backend
// side of package eventbus without adding to eventbus's API: eventbus fills
// these variables in its init, and only eventbus/backend calls them.
//
// This package cannot import eventbus (eventbus imports it), so values that
// are eventbus types travel as any; each variable says what they are.
package hook
