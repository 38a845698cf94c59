package detect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpuctl/gpuctl/internal/distro"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/version"
	"sigs.k8s.io/yaml"
)

// corpusDir holds real Node objects copied from public issue reports and documentation, one per file, under a
// directory named after the distribution the source says the node belongs to. Each file opens with the source URL and
// what was trimmed; many are partial (only labels, only nodeInfo, only a name), as the sources are.
const corpusDir = "testdata/corpus"

// corpusThreshold is the share of corpus nodes detection must get right where a platform-unique signal exists
// (issue 11: ≥ 95%). The same share applies to GPU nodes and to nodes with no such signal.
const corpusThreshold = 0.95

// corpusEntry is one corpus file.
type corpusEntry struct {
	// Distribution is what the source says the node is.
	Distribution string `json:"distribution"`
	// GPU is whether the source says the node has NVIDIA GPUs: true, false or unknown.
	GPU gpuTruth `json:"gpu"`
	// UniqueSignal names what in the node points at its distribution and at no other, as a person reads it; empty
	// when nothing does (an EKS node showing only EC2 labels, a runtime string shared by k3s and RKE2). Only
	// entries with one count towards the distribution score.
	UniqueSignal string `json:"uniqueSignal"`
	// GPUSignal names what in the node shows its GPUs; empty when the source shows none (a GPU node whose device
	// plugin is not running yet). Only GPU nodes with one count towards the GPU score.
	GPUSignal string `json:"gpuSignal"`
	// APIGroups and ServerVersion are given where the source shows them.
	APIGroups     []string    `json:"apiGroups"`
	ServerVersion string      `json:"serverVersion"`
	Node          corev1.Node `json:"node"`

	file string
}

// gpuTruth reads `gpu: true`, `gpu: false` and `gpu: unknown`.
type gpuTruth string

func (g *gpuTruth) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case bool:
		*g = gpuTruth(fmt.Sprint(v))
	case string:
		if v != "unknown" {
			return fmt.Errorf("gpu: want true, false or unknown, got %q", v)
		}
		*g = gpuTruth(v)
	default:
		return fmt.Errorf("gpu: want true, false or unknown, got %s", b)
	}
	return nil
}

func loadCorpus(t *testing.T) []corpusEntry {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(corpusDir, "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, d := range distro.All() {
		known[d.Name] = true
	}
	var out []corpusEntry
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(raw, []byte("# Source: https://")) {
			t.Errorf("%s: does not open with a \"# Source: https://…\" line", f)
		}
		var e corpusEntry
		if err := yaml.UnmarshalStrict(raw, &e); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		e.file = filepath.ToSlash(strings.TrimPrefix(f, corpusDir+string(filepath.Separator)))
		if dir := filepath.Base(filepath.Dir(f)); e.Distribution != dir || !known[dir] {
			t.Errorf("%s: distribution %q, directory %q: both must name the same known distribution", f, e.Distribution, dir)
		}
		if e.GPU == "" {
			t.Errorf("%s: gpu is not set (true, false or unknown)", f)
		}
		out = append(out, e)
	}
	return out
}

// snapshot is the corpus entry as a one-node cluster.
func (e corpusEntry) snapshot() *Snapshot {
	s := &Snapshot{Nodes: []corev1.Node{e.Node}, APIGroups: e.APIGroups}
	if e.ServerVersion != "" {
		s.ServerVersion = &version.Info{GitVersion: e.ServerVersion}
	}
	return s
}

type score struct{ right, total int }

func (s score) String() string {
	if s.total == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d right (%.1f%%)", s.right, s.total, 100*float64(s.right)/float64(s.total))
}

func (s score) below(threshold float64) bool {
	return s.total > 0 && float64(s.right) < threshold*float64(s.total)
}

// TestCorpus runs detection over every corpus node, each as a one-node cluster, and scores it: the distribution
// where a platform-unique signal exists, GPU nodes where the node shows its GPUs. Nodes without a unique signal
// must come out as the right distribution or as a low-confidence fallback, never as a confident wrong answer.
func TestCorpus(t *testing.T) {
	entries := loadCorpus(t)
	if len(entries) == 0 {
		t.Fatal("no corpus files under " + corpusDir)
	}

	var dist, unsure, gpu score
	perDistro := map[string]*score{}
	var misses []string
	for _, e := range entries {
		r := Analyze(e.snapshot())
		got := r.Distribution
		right := got.Name == e.Distribution
		if e.UniqueSignal != "" {
			dist.total++
			ps := perDistro[e.Distribution]
			if ps == nil {
				ps = &score{}
				perDistro[e.Distribution] = ps
			}
			ps.total++
			if right {
				dist.right++
				ps.right++
			} else {
				misses = append(misses, fmt.Sprintf("distribution: %s: want %s (%s), got %s at %d%%", e.file, e.Distribution, e.UniqueSignal, got.Name, got.Confidence))
			}
		} else {
			unsure.total++
			if right || got.Fallback {
				unsure.right++
			} else {
				misses = append(misses, fmt.Sprintf("no unique signal: %s: want %s or a fallback, got %s at %d%%", e.file, e.Distribution, got.Name, got.Confidence))
			}
		}

		isGPU := len(r.GPUNodes) > 0
		switch {
		case e.GPU == "true" && e.GPUSignal != "", e.GPU == "false":
			gpu.total++
			if isGPU == (e.GPU == "true") {
				gpu.right++
			} else {
				misses = append(misses, fmt.Sprintf("gpu: %s: want %s, got %v", e.file, e.GPU, isGPU))
			}
		}
	}

	var names []string
	for n := range perDistro {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("  %-9s %s", n, perDistro[n])
	}
	sort.Strings(misses)
	for _, m := range misses {
		t.Log("  miss: " + m)
	}
	t.Logf("corpus: %d nodes from public sources", len(entries))
	t.Logf("distribution: %s where a platform-unique signal exists", dist)
	t.Logf("distribution: %s or a low-confidence fallback where none exists", unsure)
	t.Logf("GPU nodes: %s where the source says whether the node has GPUs and shows them", gpu)

	if dist.below(corpusThreshold) {
		t.Errorf("distribution: %s, want at least %.0f%%", dist, 100*corpusThreshold)
	}
	if unsure.below(corpusThreshold) {
		t.Errorf("no unique signal: %s, want at least %.0f%% right or a fallback", unsure, 100*corpusThreshold)
	}
	if gpu.below(corpusThreshold) {
		t.Errorf("GPU nodes: %s, want at least %.0f%%", gpu, 100*corpusThreshold)
	}
}

// TestCorpusIndexListsEveryFile keeps docs/detection-corpus.md, the readable index, in step with the files.
func TestCorpusIndexListsEveryFile(t *testing.T) {
	index, err := os.ReadFile(filepath.Join("..", "..", "docs", "detection-corpus.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range loadCorpus(t) {
		if !bytes.Contains(index, []byte("| "+filepath.Base(e.file)+" |")) {
			t.Errorf("docs/detection-corpus.md does not list %s", e.file)
		}
	}
}
