// Package validate is rehearse sim validate: it fits a simulator profile
// (package fit) to each chosen server of a results bundle on some loads,
// predicts the loads held out, runs them live through the one runner
// against rehearse sim with the fitted profiles, and writes and prints the
// error table.
//
// It sits above package rehearsal: the runner imports the predictor
// (package predict) and never this package, which drives the runner: the
// live run is the one rehearse run makes (rehearsal.Rehearse).
package validate
