package bundle

import "context"

// VerifyBothWays verifies dir as verify streams it and as it holds its
// records; took says whether the streaming path took the bundle, held
// whether it read the records whole after all (to list how the journal
// differs).
func VerifyBothWays(dir string, o Options) (streamed Report, took, heldForJournal bool, held Report) {
	ctx := context.Background()
	_, held, _ = verifyDirOpt(ctx, dir, o, false)
	d, err := OpenDir(dir)
	if err != nil {
		return held, false, false, held
	}
	defer d.Close()
	streamed.Problems, _ = d.verifySums(ctx)
	sv, took, _ := d.verifyStreaming(ctx, o, &streamed)
	streamed.Problems = dedupe(streamed.Problems)
	return streamed, took, sv.heldForJournal, held
}
