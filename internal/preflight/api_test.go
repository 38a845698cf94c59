package preflight

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuctl/gpuctl/internal/plan"
)

func TestAPI(t *testing.T) {
	t.Run("an answering API server and a detected cluster pass", func(t *testing.T) {
		env := testEnv()
		kube, _ := fakeKube(allowAll)
		kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
		env.Kube = kube
		expect(t, run(t, "api", env), StatusPass, "v1.37.2, kubeadm", "")
	})
	t.Run("an API server that does not answer fails", func(t *testing.T) {
		env := testEnv()
		kube, _ := fakeKube(allowAll)
		kube.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("dial tcp 10.0.0.1:6443: connection refused")
		})
		env.Kube = kube
		expect(t, run(t, "api", env), StatusFail, "connection refused", "kubectl config current-context")
	})
	t.Run("a detection that failed fails", func(t *testing.T) {
		env := testEnv()
		env.Detection, env.DetectError = nil, errors.New("list nodes: forbidden")
		expect(t, run(t, "api", env), StatusFail, "reading the cluster failed: list nodes: forbidden", "gpuctl detect")
	})
}

func TestPlanCheck(t *testing.T) {
	t.Run("a plan passes with its profile", func(t *testing.T) {
		expect(t, run(t, "plan", testEnv()), StatusPass, "profile kubeadm", "")
	})
	t.Run("an unsupported cluster fails and says gpuctl does not install there", func(t *testing.T) {
		env := testEnv()
		env.Plan, env.PlanError = nil, fmt.Errorf("%w: on OpenShift use OLM", plan.ErrUnsupported)
		expect(t, run(t, "plan", env), StatusFail, "on OpenShift use OLM", "does not install on this cluster")
	})
	t.Run("bad values fail and point at the values flags", func(t *testing.T) {
		env := testEnv()
		env.Plan, env.PlanError = nil, errors.New(`--set: key "a" has no value`)
		expect(t, run(t, "plan", env), StatusFail, "--set", "--profile, -f or --set")
	})
}
