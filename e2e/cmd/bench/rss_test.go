package main

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func TestParseVmHWM(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   int64
		ok     bool
	}{
		{"Name:\tgpuctl\nVmPeak:\t 2000 kB\nVmHWM:\t  170740 kB\nVmRSS:\t 1 kB\n", 170740 << 10, true},
		{"VmHWM: 12 kB", 12 << 10, true},
		{"Name:\tzombie\nState:\tZ (zombie)\n", 0, false},
		{"VmHWM:\t12 MB\n", 0, false},
		{"VmHWM:\tx kB\n", 0, false},
	} {
		got, ok := parseVmHWM([]byte(tc.status))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseVmHWM(%q) = %d, %v; want %d, %v", tc.status, got, ok, tc.want, tc.ok)
		}
	}
}

// TestFollowRSSIsTheChildsOwn shows why the bench does not use the rusage of wait4: with this
// test process holding 256 MB, a child that is a few MB reports a ru_maxrss of at least 256 MB,
// while its sampled VmHWM is its own.
func TestFollowRSSIsTheChildsOwn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is Linux's")
	}
	ballast := make([]byte, 256<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	// The child lives until the sampler has read it: on a loaded machine a short-lived child could
	// exit (and be reaped) before the sampler's first read.
	cmd := exec.Command("sleep", "120")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	p, stop := followRSS(cmd.Process.Pid, 20*time.Millisecond)
	for deadline := time.Now().Add(60 * time.Second); p.Peak() == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	runtime.KeepAlive(ballast)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if got := ru.Maxrss << 10; got < 256<<20 {
		t.Logf("this kernel does not carry the parent's size into ru_maxrss (%d MB)", got>>20)
	}
	if peak := p.Peak(); peak <= 0 || peak > 64<<20 {
		t.Fatalf("sampled peak RSS of sleep = %d MB, want between 0 and 64 MB", peak>>20)
	}
}
