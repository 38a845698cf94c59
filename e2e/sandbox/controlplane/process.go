package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Spawner starts every child process of a sandbox from one OS thread that stays alive until the
// sandbox stops. Children get PR_SET_PDEATHSIG=SIGKILL, which Linux delivers when the *thread* that
// forked them exits — so they must not be forked from whatever thread the Go scheduler happens to
// use. With this, a test binary killed by `go test -timeout`, Ctrl-C or SIGKILL takes its whole
// cluster with it: no orphans, even when no cleanup code gets to run.
type Spawner struct {
	reqs chan spawnReq
	quit chan struct{}
	once sync.Once
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// NewSpawner starts the spawner's thread; Close ends it.
func NewSpawner() *Spawner {
	s := &Spawner{reqs: make(chan spawnReq), quit: make(chan struct{})}
	go func() {
		// Never unlocked: when this goroutine returns, the runtime ends the thread, which is what
		// we want only after every child has been stopped.
		runtime.LockOSThread()
		for {
			select {
			case r := <-s.reqs:
				r.done <- r.cmd.Start()
			case <-s.quit:
				return
			}
		}
	}()
	return s
}

func (s *Spawner) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	select {
	case s.reqs <- spawnReq{cmd: cmd, done: done}:
		return <-done
	case <-s.quit:
		return errors.New("sandbox is stopping")
	}
}

// Close ends the spawner's thread, after which Start fails.
func (s *Spawner) Close() { s.once.Do(func() { close(s.quit) }) }

// Process is one running program of the sandbox with its log file.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	exited  chan struct{}
	err     error // set before exited is closed
}

// Start runs bin with args, stdout and stderr appended to logPath, in its own process group so
// that stop reaches anything it forks. unshare are clone flags of namespaces the process gets of its
// own (0: none).
func (s *Spawner) Start(name, bin string, args, env []string, dir, logPath string, unshare uintptr) (*Process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Unshareflags: unshare}
	if err := s.start(cmd); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, log: log, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.exited)
	}()
	return p, nil
}

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM to the process group, and SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if !p.Running() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
}

// TailFile returns the last n lines of a file ("" when it cannot be read).
func TailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const maxRead = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxRead {
		_, _ = f.Seek(-maxRead, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Name is the name the process was started under ("etcd", "kube-apiserver", "gpu-operator").
func (p *Process) Name() string { return p.name }

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is how the process exited (nil for exit status 0); valid once Exited is closed.
func (p *Process) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}
