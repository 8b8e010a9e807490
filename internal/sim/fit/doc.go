// Package fit fits a simulator profile (an engine.Profile) to one server of
// a results bundle from its raw records of any load mode (Profile), with a
// derivation line for every fitted number and what the model leaves
// unexplained; sets its predictions beside the bundle's measured waves
// (Compare); and validates it (Validate): fitted on some loads, predicted
// on the others, the predictor's error tabulated per held-out load and
// metric, to which a live simulator run's rows are added (AddLive).
// Command is rehearse sim fit: the fit, the comparison, the profile
// written and the derivation printed.
//
// Both sides of every comparison count generated tokens
// (GeneratedCounts). The live run itself goes through the runner (package
// rehearsal), which imports package predict; it is driven from the
// command (rehearse sim validate), above both, so that nothing the runner
// imports imports it back.
package fit
