package lock

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

// fakeProc is a process table: files by path, and the pid namespace link.
type fakeProc struct {
	files map[string]string
	ns    string
}

func (f fakeProc) ReadFile(name string) ([]byte, error) {
	if s, ok := f.files[name]; ok {
		return []byte(s), nil
	}
	return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
}

func (f fakeProc) Readlink(string) (string, error) {
	if f.ns == "" {
		return "", os.ErrNotExist
	}
	return f.ns, nil
}

// stat is a /proc/PID/stat line whose command name holds spaces and a parenthesis, started at ticks.
func stat(pid, ticks string) string {
	return pid + " (gpu ctl) x) S 1 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 9 0 " + ticks + " 1000 200 18446744073709551615\n"
}

func TestProcessGone(t *testing.T) {
	machine := fakeProc{ns: "pid:[4026531836]", files: map[string]string{
		"/proc/sys/kernel/random/boot_id": "8ae1410f-896f-49af-8a51-99107c88cc41\n",
		"/proc/41/stat":                   stat("41", "5000"),
	}}
	self := processIdentity(machine, 41)
	if self != "linux:8ae1410f-896f-49af-8a51-99107c88cc41:pid:[4026531836]:41:5000" {
		t.Fatalf("identity %q", self)
	}
	for _, tc := range []struct {
		name     string
		identity string
		proc     fakeProc
		gone     bool
	}{
		{"the process runs", self, machine, false},
		{"its PID is free", "linux:8ae1410f-896f-49af-8a51-99107c88cc41:pid:[4026531836]:77:5000", machine, true},
		{"its PID was reused by a later process", "linux:8ae1410f-896f-49af-8a51-99107c88cc41:pid:[4026531836]:41:4000", machine, true},
		{"another boot: cannot tell", "linux:00000000-896f-49af-8a51-99107c88cc41:pid:[4026531836]:77:5000", machine, false},
		{"another pid namespace (a container): cannot tell", "linux:8ae1410f-896f-49af-8a51-99107c88cc41:pid:[4026532000]:77:5000", machine, false},
		{"no /proc here", self, fakeProc{}, false},
		{"an identity from an older gpuctl or another system", "", machine, false},
		{"garbage", "linux:a:b", machine, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := processGone(tc.proc, tc.identity); got != tc.gone {
				t.Errorf("processGone(%q) = %v, want %v", tc.identity, got, tc.gone)
			}
		})
	}
	if got := processIdentity(fakeProc{}, 41); got != "" {
		t.Errorf("identity without /proc = %q", got)
	}
}

func TestProcessIdentityOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	id := processIdentity(osProcFS{}, os.Getpid())
	if id == "" {
		t.Fatal("no identity for this process")
	}
	if processGone(osProcFS{}, id) {
		t.Errorf("this process %q is seen as gone", id)
	}
}

// A run killed with SIGKILL leaves the Lease held; the next run on the same machine sees that its
// process is gone and takes the lock at once, saying whose it was.
func TestAcquireTakesOverFromAKilledRunOnThisMachine(t *testing.T) {
	machine := fakeProc{ns: "pid:[4026531836]", files: map[string]string{
		"/proc/sys/kernel/random/boot_id": "b\n",
		"/proc/41/stat":                   stat("41", "5000"),
		"/proc/42/stat":                   stat("42", "6000"),
	}}
	cs := fake.NewClientset()
	clk := newClock(0)
	killed := run("alpha", 41)
	killed.Process = processIdentity(machine, 41)
	if _, err := (&Lock{Client: cs.CoordinationV1(), Holder: killed, Clock: clk, proc: machine}).Acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	next := run("alpha", 42)
	next.Process = processIdentity(machine, 42)

	// While the first run's process lives, the lock is held.
	if _, err := (&Lock{Client: cs.CoordinationV1(), Holder: next, Clock: clk, proc: machine}).Acquire(t.Context()); err == nil {
		t.Fatal("took a lock whose holder runs")
	}
	delete(machine.files, "/proc/41/stat") // kill -9
	clk.Step(time.Second)
	h, err := (&Lock{Client: cs.CoordinationV1(), Holder: next, Clock: clk, proc: machine}).Acquire(t.Context())
	if err != nil {
		t.Fatalf("the killed holder's lock was not taken over: %v", err)
	}
	defer h.Release(context.Background())
	if h.TookOver == nil || h.TookOver.PID != 41 {
		t.Errorf("TookOver = %+v, want the killed run", h.TookOver)
	}
	if l := lease(t, cs); l.Annotations[AnnotationProcess] != next.Process {
		t.Errorf("process annotation %q, want %q", l.Annotations[AnnotationProcess], next.Process)
	}
}
