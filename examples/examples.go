// Package examples holds the example rehearsal files; the simulated one is
// embedded because `rehearse demo` runs it.
package examples

import _ "embed"

// Simulated is examples/simulated.yaml: the canonical rehearsal against two
// `rehearse sim` processes at time scale 10.
//
//go:embed simulated.yaml
var Simulated []byte

// Capacity is examples/capacity.yaml: a capacity search of the two
// simulated servers at time scale 50, which `rehearse demo --capacity` runs.
//
//go:embed capacity.yaml
var Capacity []byte
