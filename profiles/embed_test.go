package profiles

import (
	"io/fs"
	"strings"
	"testing"
)

func TestEmbeddedFiles(t *testing.T) {
	files, err := fs.Glob(FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("embedded %d profiles (%v), want at least kubeadm, gke, tkgs, rke2, openshift", len(files), files)
	}
	for _, f := range files {
		t.Run(f+" opens with a description header", func(t *testing.T) {
			b, err := fs.ReadFile(FS, f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), "# description: ") {
				t.Errorf("first line is %q, want \"# description: …\"", strings.SplitN(string(b), "\n", 2)[0])
			}
		})
	}
}
