package sim

import "github.com/rehearse/rehearse/internal/tokenizer"

// defaultCounter is the pinned tokenizer every test and the demo count with.
func defaultCounter() (Counter, error) { return tokenizer.Default() }
