package e2e

// Chromium tabs with the browser-module test page: opening them, reading
// what each page holds, and the faults a tab can meet (hidden, frozen,
// offline). See browser_harness_test.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// pageTab is one Chromium tab with the test page.
type pageTab struct {
	ctx    context.Context
	cancel context.CancelFunc
	name   string
}

// headless is headless Chromium with the test page in tabs of one
// window: only the active tab is visible, as in a real browser.
type headless struct {
	t     *testing.T
	ctx   context.Context // the browser's first tab, left blank
	close func()
	n     int
}

func newHeadless(t *testing.T, timeout time.Duration) *headless {
	t.Helper()
	exe := needTool(t, "chromium", "/usr/bin/chromium", "chromium-browser")
	ctx, closeBrowser := browserTab(t, exe, timeout)
	require.NoError(t, chromedp.Do(ctx))
	return &headless{t: t, ctx: ctx, close: closeBrowser}
}

// open opens the page in a new tab of the browser's window.
func (b *headless) open(pageURL string) *pageTab {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewWindow(false))
	b.n++
	tab := &pageTab{ctx: ctx, cancel: cancel, name: "tab" + strconv.Itoa(b.n)}
	require.NoError(b.t, chromedp.Do(ctx, chromedp.Navigate(pageURL)), "opening %s", tab.name)
	return tab
}

func eval[T any](tab *pageTab, expr string) (T, error) {
	return chromedp.Run(tab.ctx, chromedp.Evaluate[T](expr))
}

// pageView is what a tab's page holds.
type pageView struct {
	Rec      [][]any        `json:"rec"`
	Leader   bool           `json:"leader"`
	Status   string         `json:"status"`
	Cursor   string         `json:"cursor"`
	Turn     string         `json:"turn"`
	Presence map[string]any `json:"presence"`
	T        struct {
		Status    []string         `json:"status"`
		Errors    []map[string]any `json:"errors"`
		Online    []float64        `json:"online"`
		Opens     []float64        `json:"opens"`
		Loads     int              `json:"loads"`
		Tokens    int              `json:"tokens"`
		Refreshes int              `json:"refreshes"`
		Set       [][]string       `json:"set"` // connection and session_* frames: [type, session, code]
	} `json:"t"`
}

func (tab *pageTab) view() (pageView, error) {
	s, err := eval[string](tab, `JSON.stringify({rec: window.rec, leader: rb.leader, status: rb.status, cursor: rb.cursor, turn: rb.turn, presence: rb.presence, t: window.t})`)
	if err != nil {
		return pageView{}, err
	}
	var v pageView
	err = json.Unmarshal([]byte(s), &v)
	return v, err
}

// leaderOf returns the tab that holds the connection (nil when none says so).
func leaderOf(tabs []*pageTab) *pageTab {
	for _, tab := range tabs {
		if l, err := eval[bool](tab, `window.rb ? rb.leader : false`); err == nil && l {
			return tab
		}
	}
	return nil
}

// waitCaughtUp waits until every tab's cursor is the last id published on
// the current incarnation, or fails with what each tab holds.
func waitCaughtUp(t *testing.T, s *browserServer, tabs []*pageTab, within time.Duration) {
	t.Helper()
	epoch, last := s.last()
	want := epoch + "-" + strconv.FormatUint(last, 10)
	deadline := time.Now().Add(within)
	for {
		behind := []string{}
		for _, tab := range tabs {
			c, err := eval[string](tab, `window.rb ? rb.cursor : ""`)
			if err != nil || c != want {
				behind = append(behind, fmt.Sprintf("%s at %q (%v)", tab.name, c, err))
			}
		}
		if len(behind) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tabs not caught up with %s after %v: %s; server: %d streams open, last requests %v", want, within,
				strings.Join(behind, ", "), s.active(), lastN(s.requests(), 5))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastN[T any](s []T, n int) []T { return s[max(0, len(s)-n):] }

// activate makes tab the visible one of its window.
func activate(b *headless, tab *pageTab) error {
	_, err := chromedp.CallBrowser(b.ctx, target.ActivateTarget, target.ActivateTargetParams{TargetID: chromedp.FromContext(tab.ctx).Target.TargetID})
	return err
}

// freeze freezes the tab's page (Page Lifecycle: no task runs) or resumes it.
func freeze(tab *pageTab, frozen bool) error {
	st := page.SetWebLifecycleStateStateActive
	if frozen {
		st = page.SetWebLifecycleStateStateFrozen
	}
	_, err := chromedp.Call(tab.ctx, page.SetWebLifecycleState, page.SetWebLifecycleStateParams{State: st})
	return err
}

// netConditions is Network.emulateNetworkConditions, which cuts the tab
// off (new requests fail); Network.overrideNetworkState then sets
// navigator.onLine and fires offline/online.
type netConditions struct {
	Offline            bool    `json:"offline"`
	Latency            float64 `json:"latency"`
	DownloadThroughput float64 `json:"downloadThroughput"`
	UploadThroughput   float64 `json:"uploadThroughput"`
}

var emulateNetworkConditions = cdp.Command[netConditions, cdp.Empty]{Method: "Network.emulateNetworkConditions"}

func setOffline(tab *pageTab, offline bool) error {
	if _, err := chromedp.Call(tab.ctx, emulateNetworkConditions, netConditions{Offline: offline, DownloadThroughput: -1, UploadThroughput: -1}); err != nil {
		return err
	}
	_, err := chromedp.Call(tab.ctx, network.OverrideNetworkState, network.OverrideNetworkStateParams{Offline: offline, DownloadThroughput: -1, UploadThroughput: -1})
	return err
}
