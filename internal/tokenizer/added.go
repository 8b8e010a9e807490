package tokenizer

import "strings"

// addedToken is one entry of added_tokens in use.
type addedToken struct {
	id         int
	content    string
	normalized bool
}

// addedMatcher splits text around added tokens, leftmost-longest as the
// library's Aho-Corasick does: tokens with normalized false are matched on
// the raw text first, those with normalized true on the normalized rest.
type addedMatcher struct {
	tokens []addedToken
	raw    tokenSet
	norm   tokenSet
}

type tokenSet struct {
	byFirst [256][]addedToken // candidates by first byte, longest first
	firsts  string            // distinct first bytes
	isFirst [256]bool
}

func newAddedMatcher(added []addedTokenJSON, hasNormalizer bool) addedMatcher {
	var m addedMatcher
	for _, a := range added {
		tok := addedToken{id: a.ID, content: a.Content, normalized: a.Normalized && hasNormalizer}
		m.tokens = append(m.tokens, tok)
		set := &m.raw
		if tok.normalized {
			set = &m.norm
		}
		set.add(tok)
	}
	return m
}

func (s *tokenSet) add(tok addedToken) {
	c := tok.content[0]
	list := s.byFirst[c]
	if len(list) == 0 {
		s.firsts += string([]byte{c})
		s.isFirst[c] = true
	}
	// Keep longest first; equal contents are the library's last one.
	i := 0
	for i < len(list) && len(list[i].content) > len(tok.content) {
		i++
	}
	if i < len(list) && list[i].content == tok.content {
		list[i] = tok
	} else {
		list = append(list, addedToken{})
		copy(list[i+1:], list[i:])
		list[i] = tok
	}
	s.byFirst[c] = list
}

// find returns the leftmost-longest match in s: start, end and id; start < 0
// when there is none.
func (s *tokenSet) find(text string) (int, int, int) {
	if len(s.firsts) == 0 {
		return -1, 0, 0
	}
	for i := 0; i < len(text); {
		if len(s.firsts) == 1 {
			j := strings.IndexByte(text[i:], s.firsts[0])
			if j < 0 {
				return -1, 0, 0
			}
			i += j
		} else {
			for i < len(text) && !s.isFirst[text[i]] {
				i++
			}
			if i == len(text) {
				return -1, 0, 0
			}
		}
		for _, tok := range s.byFirst[text[i]] {
			if strings.HasPrefix(text[i:], tok.content) {
				return i, i + len(tok.content), tok.id
			}
		}
		i++
	}
	return -1, 0, 0
}

// each encodes text: added tokens become their ids, the text between them
// is normalized and handed to encode.
func (m *addedMatcher) each(text string, dst []int,
	encode func([]int, string) []int, normalize func(string) string) []int {
	for len(text) > 0 {
		start, end, id := m.raw.find(text)
		if start < 0 {
			return m.eachNormalized(normalize(text), dst, encode)
		}
		if start > 0 {
			dst = m.eachNormalized(normalize(text[:start]), dst, encode)
		}
		dst = append(dst, id)
		text = text[end:]
	}
	return dst
}

func (m *addedMatcher) eachNormalized(text string, dst []int, encode func([]int, string) []int) []int {
	for len(text) > 0 {
		start, end, id := m.norm.find(text)
		if start < 0 {
			return encode(dst, text)
		}
		if start > 0 {
			dst = encode(dst, text[:start])
		}
		dst = append(dst, id)
		text = text[end:]
	}
	return dst
}
