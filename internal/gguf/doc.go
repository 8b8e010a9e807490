// Package gguf writes models of a given shape (SPEC §11): a decoder-only
// transformer of a named architecture (qwen2 or llama), seeded random
// weights, and the vocabulary, merges, token types, special tokens and chat
// template of a real tokenizer.json, as a GGUF v3 file that llama.cpp-based
// engines (ollama, llama.cpp's server) load. Serving cost depends on the
// shape, not on the weights' values, so a stack can be rehearsed without
// downloading weights, and the engine and rehearse count the same tokens.
//
// The file uses llama.cpp's metadata keys and tensor names, F16 (or F32)
// matrices and F32 norms and biases, alignment 32, and is written as it is
// generated, in chunks on every core, so a 3 GB model is never held in
// memory; the same seed gives the same bytes.
//
// Output that re-tokenizes exactly. Random weights emit random tokens, and
// random token soup does not re-tokenize to the tokens that made it (a
// piece such as "ab" then "c" is encoded as "abc"), so a count of the text
// would disagree with the engine's. The model is built so that it can only
// emit whole words: the tokens that are a space and ASCII letters and that
// encode back to themselves alone (WordTokens; 41,547 of Qwen's
// 151,669). Text made of them re-tokenizes to exactly them, because the
// pre-tokenizer cuts before each space. How:
//
//   - Dimension 0 of the residual stream carries a positive constant through
//     every layer. Nothing writes it but value channel 0 of kv head 0, whose
//     weights are zero and whose bias is 8 (a constant value, so attention
//     returns it whatever it attends to), mapped into dimension 0 by
//     attn_output[0][0] = 8: each layer adds 64. attn_output's other rows
//     ignore channel 0 of every head, and ffn_down's row 0 is zero.
//   - After the final RMSNorm (weights 1) dimension 0 is therefore positive,
//     and it dominates the hidden state.
//   - Each token's output weight in dimension 0 (output.weight, or
//     token_embd.weight when tied) is +4 for a word and -4 for every other
//     token, so every non-word token's logit trails every word's by about
//     8·√n_embd (64 at n_embd 64): no sampler picks one, the end-of-sequence
//     token included, so a stream runs to max_tokens.
//
// The words' logits are nearly equal, so greedy decoding (temperature 0)
// repeats one word, which ollama cuts after 30 repeats; rehearse such a model
// with sampling (temperature 1, top_k as the engine sets it) and a seed.
package gguf
