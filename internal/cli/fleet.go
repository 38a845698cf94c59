package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/gpuctl/gpuctl/internal/fleet"
	"github.com/gpuctl/gpuctl/internal/kube"
)

// exitSeverity orders gpuctl's exit codes for a fleet run, worst first: its exit code is the worst of
// its contexts'. First what leaves the fleet's state unknown — the run was interrupted, a context's
// read failed (1) or its API server did not answer (9) — for a verdict cannot be better than what
// was not read; then the verdicts from the worst down: another run holds the lock (6), a GPU node
// failed its workload (8), the stack is not ready (4); last, nothing installed (7), which in a fleet
// is often a cluster without GPUs and says nothing is broken. Usage (2), preflight (5) and
// unsupported (3) are not a status's or verify's verdicts; they rank among the failures to read.
func exitSeverity() fleet.Severity {
	return fleet.Severity{ExitInterrupted, ExitUsage, ExitError, ExitUnreachable, ExitUnsupported, ExitPreflight,
		ExitLocked, ExitVerifyFailed, ExitNotReady, ExitNotInstalled}
}

// fleetFlags are the flags that make status or verify a fleet run.
type fleetFlags struct {
	contexts    []string
	all         bool
	maxParallel int
}

func addFleetFlags(f *pflag.FlagSet, ff *fleetFlags) {
	f.StringSliceVar(&ff.contexts, "contexts", nil, "kube contexts to run over, in this order (comma-separated): one table or document for them all, the worst exit code")
	f.BoolVar(&ff.all, "all-contexts", false, "run over every context of the kubeconfig (kubectl config get-contexts), sorted by name")
	f.IntVar(&ff.maxParallel, "max-parallel", fleet.DefaultParallel, "with --contexts or --all-contexts: how many clusters to read at once")
}

// on says whether the command line asks for a fleet run.
func (ff *fleetFlags) on() bool { return len(ff.contexts) > 0 || ff.all }

// resolve judges the fleet flags before any cluster is asked and returns the contexts to run over, nil
// for a run on one cluster. --context keeps kubectl's meaning (one context) and goes with neither
// --contexts nor --all-contexts; every name must be a context of the kubeconfig.
// --max-parallel alone is not refused: a config file may set it for every run.
func (ff *fleetFlags) resolve(g *globals) ([]string, error) {
	if ff.maxParallel < 1 {
		return nil, usageError{fmt.Errorf("--max-parallel %d: must be at least 1", ff.maxParallel)}
	}
	if !ff.on() {
		return nil, nil
	}
	if len(ff.contexts) > 0 && ff.all {
		return nil, usageError{errors.New("--contexts and --all-contexts go not together: name the contexts, or take them all")}
	}
	if g.kube.Context != nil && *g.kube.Context != "" {
		return nil, usageError{errors.New("--context names one cluster; it goes with neither --contexts nor --all-contexts")}
	}
	raw, err := g.kube.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, usageError{fmt.Errorf("kubeconfig: %w", err)}
	}
	known := make([]string, 0, len(raw.Contexts))
	for name := range raw.Contexts {
		known = append(known, name)
	}
	sort.Strings(known)
	if ff.all {
		if len(known) == 0 {
			return nil, usageError{errors.New("--all-contexts: the kubeconfig has no contexts")}
		}
		return known, nil
	}
	seen := map[string]bool{}
	for _, name := range ff.contexts {
		switch {
		case name == "":
			return nil, usageError{errors.New("--contexts: an empty context name")}
		case seen[name]:
			return nil, usageError{fmt.Errorf("--contexts names %s twice", name)}
		case !slices.Contains(known, name):
			return nil, usageError{fmt.Errorf("--contexts: no context %q in the kubeconfig (it has %s)", name, orNoneList(known))}
		}
		seen[name] = true
	}
	return ff.contexts, nil
}

func orNoneList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// contextClients builds the clients of one kube context: every kubeconfig flag as given, the context
// overridden, and the API server asked once (an unreachable one is that context's error alone).
func (g *globals) contextClients(ctx context.Context, name string) (*kube.Clients, error) {
	return reachableClients(ctx, g.contextFlags(name), *g.kube.Namespace)
}

// contextFlags are the kubeconfig flags with the context set to name: a ConfigFlags of its own (its
// caches are per cluster), sharing the flags' values, which nothing writes after parsing.
func (g *globals) contextFlags(name string) *genericclioptions.ConfigFlags {
	k := g.kube
	f := genericclioptions.NewConfigFlags(true)
	f.CacheDir, f.KubeConfig = k.CacheDir, k.KubeConfig
	f.ClusterName, f.AuthInfoName, f.Namespace, f.APIServer, f.TLSServerName = k.ClusterName, k.AuthInfoName, k.Namespace, k.APIServer, k.TLSServerName
	f.Insecure, f.CertFile, f.KeyFile, f.CAFile, f.BearerToken = k.Insecure, k.CertFile, k.KeyFile, k.CAFile, k.BearerToken
	f.Impersonate, f.ImpersonateUID, f.ImpersonateGroup, f.ImpersonateUserExtra = k.Impersonate, k.ImpersonateUID, k.ImpersonateGroup, k.ImpersonateUserExtra
	f.Username, f.Password, f.Timeout, f.DisableCompression, f.ProxyURL = k.Username, k.Password, k.Timeout, k.DisableCompression, k.ProxyURL
	f.WrapConfigFn = k.WrapConfigFn
	f.Context = &name
	return f
}

// exitCode is the exit code gpuctl gives err (report's, without its line).
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	return report(io.Discard, err)
}

// fleetError is a fleet run's error: a line that counts the contexts that did not do well, wrapping
// the worst context's error so that report gives the fleet that context's exit code.
type fleetError struct {
	summary string
	worst   error
}

func (f fleetError) Error() string { return f.summary }
func (f fleetError) Unwrap() error { return f.worst }

// fleetResult is the worst outcome's error, summarised (nil when every context did well).
func fleetResult[T any](outcomes []fleet.Outcome[T]) (int, error) {
	codes := make([]int, len(outcomes))
	for i, o := range outcomes {
		codes[i] = o.ExitCode
	}
	worst := exitSeverity().Worst(codes...)
	if worst == ExitOK {
		return worst, nil
	}
	var bad []string
	var worstErr error
	for _, o := range outcomes {
		if o.ExitCode == ExitOK {
			continue
		}
		bad = append(bad, o.Context)
		if worstErr == nil && o.ExitCode == worst {
			worstErr = fmt.Errorf("context %s: %w", o.Context, o.Err)
		}
	}
	return worst, fleetError{summary: fmt.Sprintf("%d of %d contexts did not pass (%s); first of the worst: %v", len(bad), len(outcomes), strings.Join(bad, ", "), worstErr), worst: worstErr}
}
