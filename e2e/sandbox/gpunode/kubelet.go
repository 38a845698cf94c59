package gpunode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuctl/gpuctl/e2e/sandbox/kubeletdm"
)

// ensureKubelet starts node's kubelet device manager, once, and returns its device-plugins directory
// when kubelet.sock is served there. It runs until the Runner's context ends, as a node's kubelet
// outlives the plugin pods.
func (r *Runner) ensureKubelet(node string) (string, error) {
	dir := filepath.Join(r.sockRoot, node)
	sock := filepath.Join(dir, kubeletdm.KubeletSocketName)
	r.mu.Lock()
	started := r.kubelets[node]
	r.kubelets[node] = true
	r.mu.Unlock()
	if !started {
		logPath := filepath.Join(r.cfg.Dir, "gpunode-kubelet-"+node+".log")
		lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return "", err
		}
		m := &kubeletdm.Manager{Client: r.cfg.Agents, Node: node, Dir: dir, Log: lf}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer lf.Close()
			if err := m.Run(r.ctx); err != nil {
				r.cfg.Logf("gpunode: the kubelet device manager of node %s stopped: %v", node, err)
			}
		}()
	}
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(sock); err == nil {
			return dir, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the kubelet device manager of node %s does not serve %s", node, sock)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
