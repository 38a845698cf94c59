package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/profile"
	"github.com/gpuctl/gpuctl/internal/release"
	"github.com/gpuctl/gpuctl/internal/render"
)

// addInstallFlags adds the flags the wizard takes as its preset choices: the render flags (but
// --sharing and --mig, which it does not offer, and --tolerate-existing-taints, which it declares
// itself) and the NVIDIA AI Enterprise inputs.
func addInstallFlags(f *pflag.FlagSet, o *engine.InstallOptions, profileHelp string) {
	addRenderFlags(f, o, profileHelp, "sharing", "mig", "tolerate-existing-taints")
	addLicensingFlags(f, &o.Licensing)
}

// validateNamespace refuses a -n that Kubernetes would refuse at the first write: a namespace name is
// a DNS-1123 label (k8s.io/apimachinery/pkg/api/validation ValidateNamespaceName).
func validateNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return usageError{fmt.Errorf("-n/--namespace %q is not a valid namespace name: %s", ns, strings.Join(errs, "; "))}
	}
	return nil
}

// validateTimeout refuses a --timeout that would end the run before it starts.
func validateTimeout(d time.Duration) error {
	if d <= 0 {
		return usageError{fmt.Errorf("--timeout %s: must be positive (e.g. 20m)", d)}
	}
	return nil
}

// validateWaitForLock refuses a negative --wait-for-lock (0 is "do not wait").
func validateWaitForLock(d time.Duration) error {
	if d < 0 {
		return usageError{fmt.Errorf("--wait-for-lock %s: must not be negative (0 does not wait)", d)}
	}
	return nil
}

// validateInstallInputs judges install's inputs before anything is read from the cluster: the
// preflight checks to skip, the timeout, the lock wait and the options (install, the wizard).
func validateInstallInputs(o *engine.InstallOptions) error {
	if err := (&preflight.Runner{Skip: o.SkipChecks}).Validate(); err != nil {
		return usageError{err}
	}
	if err := validateTimeout(o.Timeout); err != nil {
		return err
	}
	if err := validateWaitForLock(o.WaitForLock); err != nil {
		return err
	}
	return validateInstallOptions(o)
}

// validateInstallOptions judges every input of an install (or check --pre) that needs no cluster:
// the profile's name, the --set expressions, the values files and the licensing files. Each mistake
// is one usage error naming the input.
func validateInstallOptions(o *engine.InstallOptions) error {
	if err := validateRenderOptions(o); err != nil {
		return err
	}
	return validateLicensingFiles(o.Licensing)
}

// validateValuesOptions judges the values flags: --profile, --set and -f.
func validateValuesOptions(o *engine.InstallOptions) error {
	if o.Profile != "" {
		if _, err := profile.Get(o.Profile); err != nil {
			return usageError{fmt.Errorf("--profile %s: %w", o.Profile, err)}
		}
	}
	if err := validateSet(o.Set); err != nil {
		return usageError{err}
	}
	if err := validateImageOptions(o); err != nil {
		return err
	}
	for _, f := range o.ValuesFiles {
		if err := checkValuesFile(f); err != nil {
			return usageError{err}
		}
	}
	return nil
}

// detectionFailed marks a failed detection in install as a failed preflight check (exit 5), as check
// --pre reports it: detection runs before anything is written, and fails for want of permissions
// (--as=nobody) or of an answering API. Other errors keep their own meaning.
func detectionFailed(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, preflight.ErrFailed) {
		return err
	}
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || errors.As(err, new(*detect.Error)) {
		return fmt.Errorf("%w: %w", preflight.ErrFailed, err)
	}
	return err
}

// validateLicensingFiles refuses a licensing flag naming a file that does not exist, whether or not
// the plan needs it: a typo must not pass silently on a platform that ignores the flag.
func validateLicensingFiles(l plan.Licensing) error {
	for _, in := range []struct{ flag, path string }{
		{"--nls-token-file", l.NLSTokenFile},
		{"--gridd-conf-file", l.GriddConfFile},
		{"--ngc-api-key-file", l.NGCAPIKeyFile},
	} {
		if in.path == "" || (in.flag == "--ngc-api-key-file" && in.path == "-") {
			continue
		}
		st, err := os.Stat(in.path)
		if err != nil {
			return usageError{fmt.Errorf("%s %s: %w", in.flag, in.path, unwrapPathError(err))}
		}
		if st.IsDir() {
			return usageError{fmt.Errorf("%s %s: is a directory, not a file", in.flag, in.path)}
		}
	}
	return nil
}

// checkValuesFile refuses a -f file that does not exist or is larger than render.MaxValuesFileSize
// (what gpuctl reads of one), before anything reads it.
func checkValuesFile(path string) error {
	if path == "-" {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("-f/--values %s: %w", path, unwrapPathError(err))
	}
	if st.IsDir() {
		return fmt.Errorf("-f/--values %s: is a directory, not a file", path)
	}
	if st.Size() > render.MaxValuesFileSize {
		return fmt.Errorf("-f/--values %s: %s is larger than gpuctl reads (%s): Helm stores a release in one Secret of at most 1 MiB", path, mib(st.Size()), mib(render.MaxValuesFileSize))
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// unwrapPathError drops the path and operation *os.PathError repeats ("stat /nope: no such file").
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// validateSet parses the --set expressions as the install will (Helm's strvals) and refuses what
// strvals drops without a word: an empty key ("=x", "a=1,=x") or an expression that sets nothing.
func validateSet(exprs []string) error {
	if _, err := release.ParseSet(exprs); err != nil {
		return err
	}
	for _, e := range exprs {
		parts := splitSet(e)
		if len(parts) == 0 {
			return fmt.Errorf("--set %q: sets nothing (want key=value)", e)
		}
		for _, part := range parts {
			key, _, _ := strings.Cut(part, "=")
			if key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
				return fmt.Errorf("--set %q: empty key in %q (want key=value, e.g. driver.enabled=false)", e, part)
			}
			m, err := release.ParseSet([]string{part})
			if err != nil {
				return err
			}
			if len(m) == 0 {
				return fmt.Errorf("--set %q: %q sets nothing (want key=value)", e, part)
			}
		}
	}
	return nil
}

// splitSet splits a --set expression at the commas strvals splits at: not escaped with a backslash and
// not inside a {list}.
func splitSet(e string) []string {
	var parts []string
	var cur strings.Builder
	depth := 0
	for i := 0; i < len(e); i++ {
		c := e[i]
		switch {
		case c == '\\' && i+1 < len(e):
			cur.WriteByte(c)
			i++
			cur.WriteByte(e[i])
			continue
		case c == '{':
			depth++
		case c == '}' && depth > 0:
			depth--
		case c == ',' && depth == 0:
			if cur.Len() > 0 {
				parts = append(parts, cur.String())
			}
			cur.Reset()
			continue
		}
		cur.WriteByte(c)
	}
	if cur.Len() > 0 {
		parts = append(parts, cur.String())
	}
	return parts
}
