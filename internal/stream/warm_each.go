package stream

import (
	"context"
	"errors"
)

// WarmEach is Warm for a server of several replicas balanced by the client
// (SPEC §10): it closes the idle and pre-dialed connections once, then
// opens n fresh ones to each base URL's host.
func (c *Client) WarmEach(ctx context.Context, baseURLs []string, n int) error {
	c.tr.CloseIdleConnections()
	c.Drop()
	var errs []error
	for _, u := range baseURLs {
		errs = append(errs, c.predial(ctx, u, n))
	}
	return errors.Join(errs...)
}
