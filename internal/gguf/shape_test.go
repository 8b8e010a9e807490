package gguf

import (
	"errors"
	"testing"
)

func TestShapeValidate(t *testing.T) {
	good := Shape{Arch: "qwen2", Layers: 2, Embd: 64, Heads: 4, KVHeads: 2, FFN: 128, Context: 2048,
		RopeBase: 1e6, NormEps: 1e-6, Tied: true, Type: F16}
	if err := good.Validate(100); err != nil {
		t.Fatalf("a good shape: %v", err)
	}
	for name, p := range Presets {
		if err := p.Validate(151669); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
	for _, c := range []struct {
		field string
		edit  func(*Shape)
	}{
		{"arch", func(s *Shape) { s.Arch = "gpt2" }},
		{"layers", func(s *Shape) { s.Layers = 0 }},
		{"layers", func(s *Shape) { s.Layers = maxLayers + 1 }},
		{"heads", func(s *Shape) { s.Heads = 0 }},
		{"embd", func(s *Shape) { s.Embd = 66 }},             // not a multiple of 4 heads
		{"embd", func(s *Shape) { s.Embd, s.Heads = 12, 4 }}, // head size 3 is odd
		{"kv-heads", func(s *Shape) { s.KVHeads = 3 }},
		{"ffn", func(s *Shape) { s.FFN = -1 }},
		{"vocab", func(s *Shape) { s.Vocab = 99 }},
		{"context", func(s *Shape) { s.Context = 0 }},
		{"rope-base", func(s *Shape) { s.RopeBase = 0 }},
		{"norm-eps", func(s *Shape) { s.NormEps = 1 }},
		{"type", func(s *Shape) { s.Type = 8 }},
	} {
		s := good
		c.edit(&s)
		var fe *FieldError
		if err := s.Validate(100); !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: error %v; want one naming %s", s, err, c.field)
		}
	}
}

func TestParseType(t *testing.T) {
	for in, want := range map[string]TensorType{"f16": F16, "F32": F32} {
		if got, err := ParseType(in); err != nil || got != want {
			t.Errorf("ParseType(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseType("q4_0"); err == nil {
		t.Error("q4_0 accepted")
	}
}

// TestShapeWith: the fields named are taken from the shape given, by
// their flag names; the others stay the preset's.
func TestShapeWith(t *testing.T) {
	preset := Presets["ci"]
	given := Shape{Arch: "llama", Layers: 2, Embd: 64, Heads: 4, KVHeads: 1, FFN: 128, Vocab: 7, Context: 99, RopeBase: 3, NormEps: 0.5, Tied: false}
	got := preset.With(given, func(f string) bool { return f == "layers" || f == "tied" || f == "kv-heads" })
	want := preset
	want.Layers, want.Tied, want.KVHeads = 2, false, 1
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if all := preset.With(given, func(string) bool { return true }); all != (Shape{Arch: "llama", Layers: 2, Embd: 64, Heads: 4, KVHeads: 1, FFN: 128, Vocab: 7, Context: 99, RopeBase: 3, NormEps: 0.5, Type: preset.Type}) {
		t.Errorf("every field: %+v", all)
	}
}
