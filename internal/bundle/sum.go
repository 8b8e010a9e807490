package bundle

import (
	"bytes"
	"hash/maphash"
)

// recordSum is a 128-bit keyed hash of a record's JSON.
type recordSum [2]uint64

// sumSeeds key recordSum: chosen at random by each process, so that no
// bundle can be made whose differing records hash alike.
var sumSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// sumCompact is the recordSum of raw, valid JSON, without the space
// between its tokens: results.json's indented record hashes as the
// compact line the journal holds for it.
func sumCompact(raw []byte) recordSum {
	var h [2]maphash.Hash
	h[0].SetSeed(sumSeeds[0])
	h[1].SetSeed(sumSeeds[1])
	write := func(b []byte) {
		h[0].Write(b)
		h[1].Write(b)
	}
	for len(raw) > 0 {
		// Up to the next space outside a string.
		i := 0
		for i < len(raw) {
			c := raw[i]
			if isSpace(c) {
				break
			}
			i++
			if c == '"' {
				for i < len(raw) && raw[i] != '"' {
					if raw[i] == '\\' {
						i++
					}
					i++
				}
				i++
			}
		}
		i = min(i, len(raw))
		write(raw[:i])
		for i < len(raw) && isSpace(raw[i]) {
			i++
		}
		raw = raw[i:]
	}
	return recordSum{h[0].Sum64(), h[1].Sum64()}
}

// sumBytes is the recordSum of b as it is.
func sumBytes(b []byte) recordSum {
	return recordSum{maphash.Bytes(sumSeeds[0], b), maphash.Bytes(sumSeeds[1], b)}
}

// journalRecordPrefix and journalRecordSuffix frame a record line.
var journalRecordPrefix, journalRecordSuffix = []byte(`{"record":`), []byte(`}`)

// sameSum reports whether the journal's record line holds, byte for byte
// (less the space between tokens), the record whose results.json bytes
// hash to sum: then the two decode to the same record, whatever
// json.Marshal would write for it. False says nothing: sameLine decides.
//
// Equal sums of unequal bytes happen with a probability of about 2^-128
// per record for bytes chosen without knowing the seeds, which nobody
// outside this process knows.
func sameSum(sum recordSum, line []byte) bool {
	if !bytes.HasPrefix(line, journalRecordPrefix) || !bytes.HasSuffix(line, journalRecordSuffix) {
		return false
	}
	return sumBytes(line[len(journalRecordPrefix):len(line)-len(journalRecordSuffix)]) == sum
}
