package main

import (
	"bytes"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// peakRSS follows a child process's peak resident set size from its VmHWM in /proc/PID/status.
//
// The rusage that wait4 returns cannot give it: on Linux a child's ru_maxrss starts at its
// parent's RSS when it was spawned, because exec folds the high-water mark of the image it replaces
// (the parent's, under the vfork-style clone Go's os/exec uses) into the process's record
// (https://github.com/golang/go/issues/32054). The bench holds informers on 2,000 nodes and 16,000
// pods, so the rusage figure was the bench's own size. VmHWM belongs to the program image and
// starts from zero at exec. It is gone once the process exits, so it is sampled until then; it
// only ever grows, so the last sample is the peak unless the process grew in its final interval.
type peakRSS struct {
	bytes atomic.Int64
	done  chan struct{}
}

// followRSS samples pid's VmHWM every interval until stop is called.
func followRSS(pid int, interval time.Duration) (p *peakRSS, stop func()) {
	p = &peakRSS{done: make(chan struct{})}
	quit := make(chan struct{})
	path := "/proc/" + strconv.Itoa(pid) + "/status"
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if hwm, ok := readVmHWM(path); ok {
				p.bytes.Store(hwm)
			}
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return p, func() { close(quit); <-p.done }
}

// Peak is the highest VmHWM read, in bytes; 0 when none could be read (not Linux).
func (p *peakRSS) Peak() int64 { return p.bytes.Load() }

// readVmHWM reads the "VmHWM:  123 kB" line of a /proc status file.
func readVmHWM(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	return parseVmHWM(b)
}

func parseVmHWM(status []byte) (int64, bool) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmHWM:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}
