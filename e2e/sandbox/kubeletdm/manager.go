package kubeletdm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// KubeletSocketName is the registration socket's name in the device-plugins directory
// (pluginapi.KubeletSocket, k8s.io/kubelet pkg/apis/deviceplugin/v1beta1/constants.go@v0.37.2).
const KubeletSocketName = "kubelet.sock"

// endpointStopGracePeriod is how long the kubelet keeps a stopped plugin's resource in the node's
// capacity (k8s.io/kubernetes pkg/kubelet/cm/devicemanager/types.go@v1.37.2).
const endpointStopGracePeriod = 5 * time.Minute

// Manager is the kubelet's device manager of one node. Set the exported fields and call Run; a
// Manager runs once.
type Manager struct {
	// Client writes the node's status and reads and annotates its pods.
	Client kubernetes.Interface
	// Node is the node's name.
	Node string
	// Dir is the node's device-plugins directory (the kubelet's /var/lib/kubelet/device-plugins/):
	// kubelet.sock is served there and plugins' endpoints are dialled there. Created if missing.
	Dir string
	// Log gets a line for each registration, device update, allocation and failure (nil: discarded).
	Log io.Writer

	// stopGrace and dialTimeout override endpointStopGracePeriod and dialTimeout (tests).
	stopGrace, dialTimeout time.Duration

	logMu sync.Mutex
	// mu guards what follows.
	mu        sync.Mutex
	resources map[string]*resourceState
	pods      map[types.UID]*podState
	// statusDirty wakes the node status writer; retryPods wakes the pod worker's retries.
	statusDirty chan struct{}
	retryPods   chan struct{}
	wg          sync.WaitGroup
	runCtx      context.Context
}

// Run serves kubelet.sock until ctx is done, then disconnects the plugins, removes kubelet.sock and
// returns nil. It fails at once if the fields are incomplete or kubelet.sock cannot be served.
func (m *Manager) Run(ctx context.Context) error {
	if m.Client == nil || m.Node == "" || m.Dir == "" {
		return errors.New("kubeletdm: Manager needs Client, Node and Dir")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := m.init(ctx); err != nil {
		return err
	}
	ln, err := m.listen()
	if err != nil {
		return err
	}
	// Stop waits for Register handlers, so that none connects a plugin after disconnectAll.
	srv := grpc.NewServer(grpc.WaitForHandlers(true))
	pluginapi.RegisterRegistrationServer(srv, registration{m: m})
	m.wg.Add(2)
	go func() { defer m.wg.Done(); m.writeStatus(ctx) }()
	go func() { defer m.wg.Done(); m.watchPods(ctx) }()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	m.logf("serving %s", ln.Addr())
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("kubeletdm: serve %s: %w", ln.Addr(), err)
	}
	cancel()   // also after a serve error: the streams end, and no stop grace period starts
	srv.Stop() // closes the listener, which removes kubelet.sock
	m.disconnectAll()
	m.wg.Wait()
	return err
}

func (m *Manager) init(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.resources != nil {
		return errors.New("kubeletdm: a Manager runs once")
	}
	if m.stopGrace == 0 {
		m.stopGrace = endpointStopGracePeriod
	}
	if m.dialTimeout == 0 {
		m.dialTimeout = dialTimeout
	}
	m.resources = map[string]*resourceState{}
	m.pods = map[types.UID]*podState{}
	m.statusDirty = make(chan struct{}, 1)
	m.retryPods = make(chan struct{}, 1)
	m.runCtx = ctx
	return nil
}

// listen creates Dir, removes the sockets in it as the kubelet does when its device manager starts
// (CleanupPluginDirectory, pkg/kubelet/cm/devicemanager/manager.go@v1.37.2: every socket, not the
// checkpoint file, not directories), and listens on kubelet.sock.
func (m *Manager) listen() (net.Listener, error) {
	if err := os.MkdirAll(m.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("kubeletdm: %w", err)
	}
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		return nil, fmt.Errorf("kubeletdm: %w", err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeSocket != 0 {
			if err := os.Remove(filepath.Join(m.Dir, e.Name())); err != nil {
				return nil, fmt.Errorf("kubeletdm: clean up the device-plugins directory: %w", err)
			}
		}
	}
	sock := filepath.Join(m.Dir, KubeletSocketName)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("kubeletdm: listen on %s: %w", sock, err)
	}
	return ln, nil
}

// signal wakes a loop that waits on ch without blocking when it is already due to wake.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func (m *Manager) logf(format string, args ...any) {
	if m.Log == nil {
		return
	}
	m.logMu.Lock()
	defer m.logMu.Unlock()
	fmt.Fprintf(m.Log, "kubeletdm %s: %s\n", m.Node, fmt.Sprintf(format, args...))
}
