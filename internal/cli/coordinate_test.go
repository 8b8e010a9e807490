package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/coordinate"
)

// TestCoordinateRefusesAnOpenListenWithoutAToken (issue 28 row 4): a
// coordinator that other machines can reach does not start without a
// token (exit 2, one line naming the variable).
func TestCoordinateRefusesAnOpenListenWithoutAToken(t *testing.T) {
	t.Setenv(coordinate.TokenEnv, "")
	for _, listen := range []string{"0.0.0.0:0", ":0"} {
		code, _, stderr := runMain(context.Background(), "coordinate", "--workers", "2", "--listen", listen)
		if code != 2 || !strings.Contains(stderr, coordinate.TokenEnv) {
			t.Errorf("--listen %s without a token: exit %d, stderr %q; want 2 naming %s", listen, code, stderr, coordinate.TokenEnv)
		}
	}
}
