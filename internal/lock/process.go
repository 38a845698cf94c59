package lock

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A run's process identity, as written to the Lease: "linux:<boot id>:<pid namespace>:<pid>:<start
// time>". With it a later run on the same machine can tell that the holder is gone (killed with
// SIGKILL, or its machine rebooted) and take the lock at once instead of waiting for the Lease to
// expire. The boot id and pid namespace rule out a process of the same number in another container
// or after a reboot; the start time (field 22 of /proc/PID/stat, in clock ticks since boot) rules out
// a reused PID. Elsewhere than Linux the identity is empty and a holder is only ever seen as alive.

// procFS reads the process table; tests replace it.
type procFS interface {
	ReadFile(name string) ([]byte, error)
	Readlink(name string) (string, error)
}

type osProcFS struct{}

func (osProcFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }
func (osProcFS) Readlink(name string) (string, error) { return os.Readlink(name) }

// machine is what makes PIDs comparable: the boot and the pid namespace.
func machine(fs procFS) (string, bool) {
	boot, err := fs.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", false
	}
	ns, err := fs.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(boot)) + ":" + ns, true
}

// startTime is field 22 of /proc/PID/stat; the command name (field 2) may hold spaces and
// parentheses, so fields are counted after its closing parenthesis.
func startTime(fs procFS, pid int) (string, error) {
	b, err := fs.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// After the name: state is field 3, so start time (22) is index 22-3.
	if len(f) < 20 {
		return "", fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return f[22-3], nil
}

// processIdentity describes pid on this machine, or "" when it cannot be told.
func processIdentity(fs procFS, pid int) string {
	m, ok := machine(fs)
	if !ok {
		return ""
	}
	st, err := startTime(fs, pid)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("linux:%s:%d:%s", m, pid, st)
}

// processGone reports whether the process an identity names is certainly not running: it was on
// this machine (same boot, same pid namespace) and its PID is free or belongs to a process started
// at another time. Anything unknown counts as running.
func processGone(fs procFS, identity string) bool {
	parts := strings.Split(identity, ":")
	// linux, boot id, "pid", "[inode]", pid, start time: the namespace link itself holds a colon.
	if len(parts) != 6 || parts[0] != "linux" {
		return false
	}
	m, ok := machine(fs)
	if !ok || m != parts[1]+":"+parts[2]+":"+parts[3] {
		return false
	}
	pid, err := strconv.Atoi(parts[4])
	if err != nil || pid <= 0 {
		return false
	}
	st, err := startTime(fs, pid)
	if os.IsNotExist(err) {
		return true
	}
	if err != nil {
		return false
	}
	return st != parts[5]
}
