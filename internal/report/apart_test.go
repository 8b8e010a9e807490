package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rehearse/rehearse/internal/bundle/bundletest"
)

// The report and bench's summary show the requests per LoRA adapter
// where a load asked for several, and the side probes beside a load; a
// bundle with neither shows neither section.
func TestApartSections(t *testing.T) {
	res := bundletest.Apart()
	md := string(Markdown(res, nil, nil))
	for _, want := range []string{
		"## LoRA adapters", "| naive | 8 clients | sql-lora | 12 |", "| batching | 32 clients | chat-lora |",
		"## Side probes", `prompt "Hi", max_tokens 1`, "the next 0.5 s after the last ended", "waves of kind `side_probe`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	models := ModelsTable(res)
	// 8 and 32 clients of two servers, two adapters each; 1 client sends
	// one prompt, one adapter: no breakdown there.
	if len(models.Rows) != 8 {
		t.Errorf("%d model rows, want 8", len(models.Rows))
	}
	probes := SideProbesTable(res)
	if len(probes.Rows) != 3 || probes.Rows[2][1] != "32 clients" || probes.Rows[2][2] != "6" || probes.Rows[2][3] != "0/6 (0%)" {
		t.Errorf("side probe rows %q", probes.Rows)
	}
	var b bytes.Buffer
	probes.Text(&b)
	if !strings.Contains(b.String(), "p99 E2E") {
		t.Errorf("text:\n%s", b.String())
	}
	plain := string(Markdown(bundletest.SeedLike(), nil, nil))
	if strings.Contains(plain, "## LoRA adapters") || strings.Contains(plain, "## Side probes") {
		t.Error("a bundle without adapters or side probes has their sections")
	}
}
