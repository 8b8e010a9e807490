package fit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/sim/engine"
)

// argvKVBudget reads a KV budget from a launch argv: vLLM's
// --num-gpu-blocks-override × --block-size (default 16), or rehearse sim's
// --kv-token-budget; 0 when it says neither.
func argvKVBudget(argv []string) (int, string) {
	if n, ok := argvInt(argv, "--kv-token-budget"); ok && n > 0 {
		return n, "from the launch argv's --kv-token-budget"
	}
	if n, ok := argvInt(argv, "--num-gpu-blocks-override"); ok && n > 0 {
		bs := 16
		if b, ok := argvInt(argv, "--block-size"); ok && b > 0 {
			bs = b
		}
		return n * bs, fmt.Sprintf("= the launch argv's --num-gpu-blocks-override %d × block size %d", n, bs)
	}
	return 0, ""
}

// argvPrefixCaching reads whether a launch argv turns prefix caching on.
func argvPrefixCaching(argv []string) (bool, string) {
	for i, a := range argv {
		switch {
		case a == "--enable-prefix-caching":
			return true, "the launch argv says --enable-prefix-caching"
		case a == "--no-enable-prefix-caching":
			return false, "the launch argv says --no-enable-prefix-caching"
		case a == "--prefix-caching=on" || (a == "--prefix-caching" && i+1 < len(argv) && argv[i+1] == "on"):
			return true, "the launch argv says --prefix-caching on"
		case a == "--prefix-caching=off" || (a == "--prefix-caching" && i+1 < len(argv) && argv[i+1] == "off"):
			return false, "the launch argv says --prefix-caching off"
		}
	}
	for i, a := range argv {
		name, ok := strings.CutPrefix(a, "--profile=")
		if !ok && a == "--profile" && i+1 < len(argv) {
			name, ok = argv[i+1], true
		}
		if ok && slices.Contains(engine.ProfileNames(), name) {
			if bp, err := engine.BuiltinProfile(name); err == nil && bp.PrefixCaching {
				return true, "the launch argv's built-in profile " + name + " caches prefixes"
			}
		}
	}
	return false, "the launch argv does not turn it on"
}

// argvInt reads "--flag N" or "--flag=N" from an argv.
func argvInt(argv []string, flag string) (int, bool) {
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
		if a == flag && i+1 < len(argv) {
			n, err := strconv.Atoi(argv[i+1])
			return n, err == nil
		}
	}
	return 0, false
}

// gpuName is the bundle's first GPU.
func gpuName(res *bundle.Results) string {
	if len(res.Provenance.GPUs) == 0 {
		return "no GPU recorded"
	}
	return res.Provenance.GPUs[0].Name
}

// joinInts lists xs as "1, 8, 64".
func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
