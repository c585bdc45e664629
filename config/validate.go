package config

import (
	"errors"
	"fmt"
)

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	if c.ReplayBufferSize == 0 {
		c.ReplayBufferSize = DefaultReplayBufferSize
	}
	if c.MaxQueueSize == 0 {
		c.MaxQueueSize = DefaultMaxQueueSize
	}
	if c.MaxQueuedBytes == 0 {
		c.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if c.MaxSubscribers == 0 {
		c.MaxSubscribers = DefaultMaxSubscribers
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.OverflowPolicy == "" {
		c.OverflowPolicy = DefaultOverflowPolicy
	}
	if c.ReplayBudgetBytes == 0 {
		c.ReplayBudgetBytes = DefaultReplayBudgetBytes
	}
	return c
}

// Validate checks c after [Config.WithDefaults] and returns every problem at
// once (joined with errors.Join), each naming the field and its value.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	if c.ReplayBufferSize < 1 || c.ReplayBufferSize > 1_000_000 {
		errs = append(errs, fmt.Errorf("config: ReplayBufferSize %d out of range [1, 1000000]", c.ReplayBufferSize))
	}
	if err := c.OverflowPolicy.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Validate returns an error naming p unless it is one of the three policies.
func (p OverflowPolicy) Validate() error {
	switch p {
	case DropSubscriber, DropOldest, DropNewest:
		return nil
	}
	return fmt.Errorf("config: unknown overflow policy %q (want drop_subscriber, drop_oldest or drop_newest)", string(p))
}
