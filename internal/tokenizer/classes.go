package tokenizer

// Character classes as the library's regex engine sees them. The ranges come
// from tables_gen.go, which pins them to what tokenizers 0.23.2 matches for
// \p{L}, \p{N} and \s (see gen_tables.go), not to Go's unicode package.
const (
	clsL   uint8 = 1 << iota // \p{L}
	clsN                     // \p{N}
	clsS                     // \s
	clsNFC                   // may change under NFC (not NFC_QC=Yes, or a non-zero combining class)
)

var asciiClass [128]uint8

// classStage1 maps cp>>8 to a block in classStage2; blocks of 256 classes
// are shared when equal.
var (
	classStage1 [0x110000 >> 8]uint16
	classStage2 []uint8
)

func init() {
	var all [0x110000]uint8
	mark := func(ranges []classRange, bit uint8) {
		for _, rg := range ranges {
			for r := rg.lo; r <= rg.hi; r++ {
				all[r] |= bit
			}
		}
	}
	mark(letterRanges, clsL)
	mark(numberRanges, clsN)
	mark(spaceRanges, clsS)
	mark(nfcRanges, clsNFC)
	blocks := map[[256]uint8]uint16{}
	for hi := 0; hi < len(classStage1); hi++ {
		var blk [256]uint8
		copy(blk[:], all[hi<<8:(hi+1)<<8])
		id, ok := blocks[blk]
		if !ok {
			id = uint16(len(classStage2) >> 8)
			blocks[blk] = id
			classStage2 = append(classStage2, blk[:]...)
		}
		classStage1[hi] = id
	}
	copy(asciiClass[:], all[:128])
}

type classRange struct{ lo, hi rune }

// runeClass returns the class bits of r; invalid runes have none.
func runeClass(r rune) uint8 {
	if uint32(r) >= 0x110000 {
		return 0
	}
	return classStage2[int(classStage1[r>>8])<<8|int(r&0xFF)]
}
