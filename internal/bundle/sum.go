package bundle

import (
	"bytes"
	"hash/maphash"
	"sync"
)

// recordSum is a 128-bit keyed hash of a record's JSON.
type recordSum [2]uint64

// sumSeeds key recordSum: chosen at random by each process, so that no
// bundle can be made whose differing records hash alike.
var sumSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// sumCompact is the recordSum of raw, a record's valid JSON as
// results.json holds it, in the form the journal writes the same record:
// without the space between tokens, with <, > and & in strings escaped
// (\u003c, \u003e, \u0026: json.Marshal escapes them, results.json does
// not) and an empty chunk_times_s (whose value begins at raw[chunks], -1
// for none) null.
func sumCompact(raw []byte, chunks int) recordSum {
	bp := sumBufs.Get().(*[]byte)
	out := appendCompact((*bp)[:0], raw, chunks)
	sum := sumBytes(out)
	*bp = out
	sumBufs.Put(bp)
	return sum
}

// appendCompact appends raw to out in sumCompact's form.
func appendCompact(out, raw []byte, chunks int) []byte {
	for i := 0; i < len(raw); {
		j := i
		for j < len(raw) && !compactSpecial[raw[j]] {
			j++
		}
		out = append(out, raw[i:j]...)
		if i = j; i == len(raw) {
			break
		}
		c := raw[i]
		switch {
		case isSpace(c):
			i++
		case c == '"':
			j := i + 1
			out = append(out, '"')
			for j < len(raw) && raw[j] != '"' {
				k := j
				for k < len(raw) && !compactStringSpecial[raw[k]] {
					k++
				}
				out = append(out, raw[j:k]...)
				if j = k; j == len(raw) || raw[j] == '"' {
					break
				}
				switch raw[j] {
				case '\\':
					out = append(out, raw[j], raw[j+1])
					j += 2
					continue
				case '<':
					out = append(out, `\u003c`...)
				case '>':
					out = append(out, `\u003e`...)
				case '&':
					out = append(out, `\u0026`...)
				}
				j++
			}
			out = append(out, '"')
			i = j + 1
		case i == chunks && c == '[':
			j := i + 1
			for j < len(raw) && isSpace(raw[j]) {
				j++
			}
			if j < len(raw) && raw[j] == ']' {
				out = append(out, "null"...)
				i = j + 1
				continue
			}
			out = append(out, c)
			i++
		default:
			out = append(out, c)
			i++
		}
	}
	return out
}

// compactSpecial are the bytes sumCompact does not copy as they are
// outside strings: space, a string's quote, an array's bracket (an empty
// chunk_times_s is written null); compactStringSpecial those inside a
// string: its end, an escape, and what json.Marshal escapes.
var compactSpecial, compactStringSpecial = func() (out, str [256]bool) {
	for _, c := range " \t\n\r\"[" {
		out[c] = true
	}
	for _, c := range "\"\\<>&" {
		str[c] = true
	}
	return out, str
}()

var sumBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// sumBytes is the recordSum of b as it is.
func sumBytes(b []byte) recordSum {
	return recordSum{maphash.Bytes(sumSeeds[0], b), maphash.Bytes(sumSeeds[1], b)}
}

// journalRecordPrefix and journalRecordSuffix frame a record line.
var journalRecordPrefix, journalRecordSuffix = []byte(`{"record":`), []byte(`}`)

// lineSum is the recordSum of the record a journal record line holds;
// false for a line not of that form. Where it equals the sum of a
// record's results.json bytes, the line holds that record byte for byte
// (less the space between tokens): then the two decode to the same
// record, whatever json.Marshal would write for it. Unequal sums say
// nothing: sameLine decides.
//
// Equal sums of unequal bytes happen with a probability of about 2^-128
// per record for bytes chosen without knowing the seeds, which nobody
// outside this process knows.
func lineSum(line []byte) (recordSum, bool) {
	if !bytes.HasPrefix(line, journalRecordPrefix) || !bytes.HasSuffix(line, journalRecordSuffix) {
		return recordSum{}, false
	}
	return sumBytes(line[len(journalRecordPrefix) : len(line)-len(journalRecordSuffix)]), true
}
