package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuctl/gpuctl/internal/bundle"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/kube"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/record"
)

// TestUpgradeRefusesUnacknowledgedValueChanges: an upgrade whose target release does not read a value
// the user set, or changes defaults, is refused before anything is written (not even the lock) unless
// acknowledged; the same release, or acknowledged changes, go on.
func TestUpgradeRefusesUnacknowledgedValueChanges(t *testing.T) {
	useOpen := plan.Layer{Source: "values.yaml", Values: map[string]any{"driver": map[string]any{"useOpenKernelModules": true}}}
	for _, tc := range []struct {
		name    string
		from    string
		files   []plan.Layer
		set     []string
		accept  bool
		refused bool
		want    []string
	}{
		{name: "v25.10.1 to v26.7.0 with a key v26.7.0 does not read is refused, naming the count and the flag",
			from: "v25.10.1", files: []plan.Layer{useOpen}, refused: true,
			want: []string{"1 value you set that v26.7.0 does not read", "defaults that change", "--accept-value-changes", "Nothing was changed"}},
		{name: "changed defaults alone are refused too", from: "v25.10.1", refused: true, want: []string{"defaults that change"}},
		{name: "acknowledged, the upgrade goes on", from: "v25.10.1", files: []plan.Layer{useOpen}, accept: true},
		{name: "the same release has nothing to acknowledge", from: "v26.7.0", files: []plan.Layer{useOpen}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			rec := &record.Record{Command: "install", Result: "succeeded", Distribution: "kubeadm", Profile: "kubeadm", Namespace: "gpu-operator",
				OperatorVersion: tc.from, Inputs: record.Inputs{Files: tc.files, Set: tc.set}}
			if err := record.Write(t.Context(), cs, rec); err != nil {
				t.Fatal(err)
			}
			cs.ClearActions()
			var warnings []string
			u := &Upgrade{Clients: &kube.Clients{Kube: cs, Discovery: cs.Discovery(), Namespace: "gpu-operator"},
				Options: UpgradeOptions{OperatorVersion: "v26.7.0", AcceptValueChanges: tc.accept},
				Sink: event.SinkFunc(func(e event.Event) {
					if e.Type == event.Warning {
						warnings = append(warnings, e.Message)
					}
				})}
			_, err := u.Run(t.Context())
			var vc *ValueChangesError
			if got := errors.As(err, &vc); got != tc.refused {
				t.Fatalf("refused %v, want %v: %v", got, tc.refused, err)
			}
			if !tc.refused {
				return // it went on to the lock and detection, which the fake cannot serve
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q not in %q", w, err)
				}
			}
			if strings.Count(err.Error(), "\n") != 0 {
				t.Errorf("not one line: %q", err)
			}
			for _, a := range cs.Actions() {
				if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
					t.Errorf("wrote before refusing: %s %s", a.GetVerb(), a.GetResource().Resource)
				}
			}
			if len(warnings) == 0 {
				t.Error("no warning names the changes")
			}
		})
	}
}

func TestValueChangesMergesRecordedAndNewInputs(t *testing.T) {
	to, err := bundle.Get("v26.7.0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &record.Record{OperatorVersion: "v25.10.1", Profile: "kubeadm", Inputs: record.Inputs{
		Files: []plan.Layer{{Source: "a.yaml", Values: map[string]any{"driver": map[string]any{"useOpenKernelModules": true}}}}}}
	for _, tc := range []struct {
		name    string
		set     []string
		notRead bool
	}{
		{"the recorded file's key is listed", nil, true},
		{"--set key=null over it removes it, as Helm does", []string{"driver.useOpenKernelModules=null"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ValueChanges(rec, to, nil, tc.set, plan.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(c.NotRead) > 0; got != tc.notRead {
				t.Errorf("not read %+v", c.NotRead)
			}
			for _, d := range c.ChangedDefaults {
				if strings.HasPrefix(d.Key, "driver.version") || strings.HasSuffix(d.Key, ".version") {
					t.Errorf("an image pin gpuctl sets is listed as a changed default: %+v", d)
				}
			}
		})
	}
}

func TestCheckPreListsUpgradeValues(t *testing.T) {
	for _, tc := range []struct {
		name      string
		installed string
		target    string
		ok        bool
		status    string
	}{
		{"an install of v25.10.1 checked for v26.7.0 warns, naming the key and its replacement", "v25.10.1", "v26.7.0", true, "warn"},
		{"the installed release itself has nothing to say", "v26.7.0", "v26.7.0", false, ""},
		{"no install, no result", "", "v26.7.0", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			if tc.installed != "" {
				rec := &record.Record{Command: "install", Result: "succeeded", Profile: "kubeadm", Namespace: "gpu-operator", OperatorVersion: tc.installed,
					Inputs: record.Inputs{Set: []string{"driver.useOpenKernelModules=true"}}}
				if err := record.Write(t.Context(), cs, rec); err != nil {
					t.Fatal(err)
				}
			}
			c := &Check{Clients: &kube.Clients{Kube: cs}, Options: InstallOptions{OperatorVersion: tc.target}}
			r, ok := c.upgradeValues(t.Context())
			if ok != tc.ok || string(r.Status) != tc.status {
				t.Fatalf("ok %v, result %+v", ok, r)
			}
			if ok && !strings.Contains(r.Message, "driver.useOpenKernelModules: v26.7.0 does not read it; NVIDIA replaced it with driver.kernelModuleType") {
				t.Errorf("message %q", r.Message)
			}
			// v25.10.1 → v26.7.0 crosses two majors: the hint says upgrade goes through v26.3.3.
			if ok && !strings.Contains(r.Hint, "v25.10.1 → v26.3.3 → v26.7.0") {
				t.Errorf("hint %q does not name the upgrade's path", r.Hint)
			}
		})
	}
}

// TestValueChangesLeaveOutWhatGpuctlsFlagsSet: v26.7 defaults dcgmExporter.serviceMonitor.enabled to
// true where v25.10 defaulted it to false. Without --monitoring that changes behaviour and is listed;
// with it, the flag sets the key and the release's default does not matter.
func TestValueChangesLeaveOutWhatGpuctlsFlagsSet(t *testing.T) {
	to, err := bundle.Get("v26.7.0")
	if err != nil {
		t.Fatal(err)
	}
	const key = "dcgmExporter.serviceMonitor.enabled"
	for _, tc := range []struct {
		name   string
		flags  plan.Options
		listed bool
	}{
		{"without --monitoring the new default is listed", plan.Options{}, true},
		{"with --monitoring it is gpuctl's", plan.Options{Monitoring: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &record.Record{OperatorVersion: "v25.10.1", Profile: "kubeadm"}
			c, err := ValueChanges(rec, to, nil, nil, tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			listed := slices.ContainsFunc(c.ChangedDefaults, func(d bundle.ChangedDefault) bool { return d.Key == key })
			if listed != tc.listed {
				t.Errorf("%s listed %v, want %v: %+v", key, listed, tc.listed, c.ChangedDefaults)
			}
		})
	}
}
