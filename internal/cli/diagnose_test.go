package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gpuctl/gpuctl/internal/support"
)

func TestDiagnoseInputs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a bundle that is not a tar.gz is a usage error", []string{"diagnose", "-o", "bundle.zip"}, "-o bundle.zip"},
		{"a zero timeout is a usage error", []string{"diagnose", "--timeout", "0s"}, "--timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, nil, append(tc.args, "--kubeconfig", "/nonexistent")...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d: %s", code, errOut)
			}
		})
	}
}

func TestWriteBundleFile(t *testing.T) {
	b := support.NewBundle(APIVersion, "v1", time.Now())
	b.AddText("status.txt", "status", "ok")
	b.Fail("nodes", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil))
	t.Run("the bundle lands under its name, readable by its owner only", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "b.tar.gz")
		m, err := writeBundleFile(b, out, "b", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(out)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%v, mode %v", err, st.Mode())
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("left behind: %v", entries)
		}
		var summary bytes.Buffer
		printBundleSummary(&summary, out, m)
		for _, want := range []string{"Wrote " + out + ": 2 files", "Not allowed to read (1)", "  nodes"} {
			if !strings.Contains(summary.String(), want) {
				t.Errorf("summary lacks %q:\n%s", want, summary.String())
			}
		}
	})
	t.Run("a directory that does not exist is an error and nothing is written", func(t *testing.T) {
		if _, err := writeBundleFile(b, filepath.Join(t.TempDir(), "nope", "b.tar.gz"), "b", time.Now()); err == nil {
			t.Error("no error")
		}
	})
}
