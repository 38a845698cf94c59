package sandbox

import (
	"github.com/gpuctl/gpuctl/e2e/sandbox/flavor"
	"github.com/gpuctl/gpuctl/e2e/sandbox/standin"
)

// The distributions live in package flavor, the hardware the stand-ins read in package standin; these
// names keep the façade's API as it was.

// Scenario says what cluster to simulate (flavor.Scenario).
type Scenario = flavor.Scenario

// NodeOS is a node's operating system, kernel included (flavor.NodeOS).
type NodeOS = flavor.NodeOS

// Ubuntu is an Ubuntu LTS release running the given kernel (flavor.Ubuntu).
func Ubuntu(release, kernel string) NodeOS { return flavor.Ubuntu(release, kernel) }

// Flavor is what one distribution looks like through the Kubernetes API (flavor.Flavor).
type Flavor = flavor.Flavor

// SimNode is one simulated node: its Node object and the hardware behind it (flavor.SimNode).
type SimNode = flavor.SimNode

// Hardware is what a simulated node has that the API cannot show (standin.Hardware).
type Hardware = standin.Hardware

// Distros returns the names of the distributions the sandbox can simulate.
func Distros() []string { return flavor.Distros() }

// FlavorFor returns the flavour of the named distribution.
func FlavorFor(name string) (Flavor, error) { return flavor.For(name) }
