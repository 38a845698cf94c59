package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const ns = "gpu-operator"

func gpuNode(name string) *corev1.Node {
	n := testNode(name, map[string]string{
		GPUPresentLabel: "true",
		"feature.node.kubernetes.io/pci-10de.present": "true",
	})
	n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	return n
}

func crashing(name string, code int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: name, RestartCount: 5,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}},
	}
}

func waitingFor(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func completed(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}
}

// stuckValidator is a validator pod whose init containers are as given.
func stuckValidator(name, node string, inits ...corev1.ContainerStatus) *corev1.Pod {
	p := validatorPod(name, node, false)
	p.Status.Phase = corev1.PodPending
	p.Status.InitContainerStatuses = inits
	p.Status.ContainerStatuses = []corev1.ContainerStatus{waitingFor("nvidia-operator-validator", "PodInitializing")}
	return p
}

func pod(name, node string, phase corev1.PodPhase, containers ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{
			Phase:             phase,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: containers,
		},
	}
}

func warning(namespace, kind, name, reason, message string, count int32, ago time.Duration) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%s.%d", name, reason, ago), Namespace: namespace},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name, Namespace: namespaceOf(kind, namespace)},
		Type:           corev1.EventTypeWarning, Reason: reason, Message: message, Count: count,
		LastTimestamp: metav1.NewTime(time.Now().Add(-ago)),
	}
}

func namespaceOf(kind, namespace string) string {
	if kind == "Node" {
		return ""
	}
	return namespace
}

func daemonSet(name string, desired, available int32, selector map[string]string) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Status:     appsv1.DaemonSetStatus{DesiredNumberScheduled: desired, NumberAvailable: available, NumberReady: available},
	}
	ds.Spec.Template.Spec.NodeSelector = selector
	return ds
}

func hintFor(r Report, pattern string) *Hint {
	for i := range r.Hints {
		if r.Hints[i].Pattern == pattern {
			return &r.Hints[i]
		}
	}
	return nil
}

func patterns(r Report) []string {
	var out []string
	for _, h := range r.Hints {
		out = append(out, h.Pattern)
	}
	slices.Sort(out)
	return out
}

func TestDiagnoseHints(t *testing.T) {
	tests := []struct {
		name         string
		objects      []runtime.Object
		nodes        []string
		wantPatterns []string
		wantObjects  map[string][]string
	}{
		{
			name:  "a validator whose driver-validation init container crash-loops points at the driver",
			nodes: []string{"gpu-1"},
			objects: []runtime.Object{
				gpuNode("gpu-1"),
				stuckValidator("nvidia-operator-validator-x7k2p", "gpu-1",
					crashing(initDriverValidation, 1),
					waitingFor(initToolkitValidation, "PodInitializing"),
					waitingFor(initCUDAValidation, "PodInitializing"),
					waitingFor(initPluginValidation, "PodInitializing")),
			},
			wantPatterns: []string{"crash-loop", "driver-not-ready"},
			wantObjects:  map[string][]string{"driver-not-ready": {"node gpu-1"}},
		},
		{
			name:  "a validator waiting in toolkit-validation after the driver validated points at the toolkit",
			nodes: []string{"gpu-1"},
			objects: []runtime.Object{
				gpuNode("gpu-1"),
				stuckValidator("nvidia-operator-validator-x7k2p", "gpu-1",
					completed(initDriverValidation),
					corev1.ContainerStatus{Name: initToolkitValidation, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
					waitingFor(initCUDAValidation, "PodInitializing")),
			},
			wantPatterns: []string{"toolkit-not-ready"},
		},
		{
			name: "an image that cannot be pulled points at the registry and pull secrets",
			objects: []runtime.Object{
				pod("nvidia-driver-daemonset-abcde", "gpu-1", corev1.PodPending, corev1.ContainerStatus{
					Name: "nvidia-driver-ctr", Image: "nvcr.io/nvidia/driver:580-ubuntu24.04",
					State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}},
				}),
			},
			wantPatterns: []string{"image-pull"},
			wantObjects:  map[string][]string{"image-pull": {"pod gpu-operator/nvidia-driver-daemonset-abcde image nvcr.io/nvidia/driver:580-ubuntu24.04"}},
		},
		{
			name: "a pod pending on the untolerated GPU taint points at tolerations",
			objects: []runtime.Object{func() *corev1.Pod {
				p := pod("gpu-operator-7c9d8-abcde", "", corev1.PodPending)
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
					Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
					Message: "0/2 nodes are available: 2 node(s) had untolerated taint {nvidia.com/gpu: present}. preemption: 0/2 nodes are available.",
				})
				return p
			}()},
			wantPatterns: []string{"untolerated-gpu-taint"},
		},
		{
			name:         "nodes without NFD's PCI labels point at NFD",
			nodes:        []string{"gpu-1", "gpu-2"},
			objects:      []runtime.Object{gpuNode("gpu-1"), testNode("gpu-2", nil)},
			wantPatterns: []string{"nfd-labels-missing"},
			wantObjects:  map[string][]string{"nfd-labels-missing": {"node gpu-2"}},
		},
		{
			name: "a validator DaemonSet with no desired pods points at the gpu.deploy labels, mig-manager does not",
			objects: []runtime.Object{
				daemonSet("nvidia-operator-validator", 0, 0, map[string]string{"nvidia.com/gpu.deploy.operator-validator": "true"}),
				daemonSet("nvidia-mig-manager", 0, 0, map[string]string{"nvidia.com/gpu.deploy.mig-manager": "true"}),
				daemonSet("nvidia-driver-daemonset", 0, 0, map[string]string{"nvidia.com/gpu.deploy.driver": "true"}),
			},
			wantPatterns: []string{"no-target-nodes"},
			wantObjects:  map[string][]string{"no-target-nodes": {"daemonset gpu-operator/nvidia-operator-validator"}},
		},
		{
			name: "DaemonSet pods rejected by Pod Security Admission point at the namespace label",
			objects: []runtime.Object{
				daemonSet("nvidia-driver-daemonset", 1, 0, map[string]string{"nvidia.com/gpu.deploy.driver": "true"}),
				warning(ns, "DaemonSet", "nvidia-driver-daemonset", "FailedCreate",
					`Error creating: pods "nvidia-driver-daemonset-x" is forbidden: violates PodSecurity "baseline:latest": privileged`, 12, time.Minute),
			},
			wantPatterns: []string{"pod-security"},
		},
		{
			name:  "a NotReady node with operands disabled gets both hints",
			nodes: []string{"gpu-1"},
			objects: []runtime.Object{func() *corev1.Node {
				n := gpuNode("gpu-1")
				n.Status.Conditions[0].Status = corev1.ConditionUnknown
				n.Labels["nvidia.com/gpu.deploy.operands"] = "false"
				return n
			}()},
			wantPatterns: []string{"node-not-ready", "operands-disabled"},
		},
		{
			name:    "a healthy namespace gives no hints",
			nodes:   []string{"gpu-1"},
			objects: []runtime.Object{gpuNode("gpu-1"), validatorPod("nvidia-operator-validator-x7k2p", "gpu-1", true), daemonSet("nvidia-operator-validator", 1, 1, nil)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fake.NewClientset(tt.objects...)
			r := Diagnose(context.Background(), c, ns, tt.nodes)
			if got, want := patterns(r), slices.Sorted(slices.Values(tt.wantPatterns)); !slices.Equal(got, want) {
				t.Errorf("hint patterns = %v, want %v\n%s", got, want, r)
			}
			for pattern, want := range tt.wantObjects {
				if h := hintFor(r, pattern); h == nil || !slices.Equal(h.Objects, want) {
					t.Errorf("hint %s = %+v, want objects %v", pattern, h, want)
				}
			}
			if len(r.Errors) > 0 {
				t.Errorf("report errors: %v", r.Errors)
			}
		})
	}
}

func TestDiagnoseGathersStateEventsAndLogs(t *testing.T) {
	validator := stuckValidator("nvidia-operator-validator-x7k2p", "gpu-1",
		crashing(initDriverValidation, 1),
		waitingFor(initToolkitValidation, "PodInitializing"))
	c := fake.NewClientset(
		gpuNode("gpu-1"), gpuNode("gpu-2"),
		validator,
		validatorPod("nvidia-operator-validator-ready", "gpu-2", true),
		pod("nvidia-cuda-validator-done", "gpu-2", corev1.PodSucceeded),
		warning(ns, "Pod", validator.Name, "BackOff", "Back-off restarting failed container driver-validation", 3, 2*time.Minute),
		warning(ns, "Pod", validator.Name, "BackOff", "Back-off restarting failed container driver-validation", 4, time.Minute),
		warning(ns, "Pod", "someone-else", "BackOff", "not ours", 1, time.Minute),
		warning("default", "Node", "gpu-1", "SystemOOM", "System OOM encountered", 1, time.Minute),
		&corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "normal", Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: validator.Name, Namespace: ns},
			Type:           corev1.EventTypeNormal, Reason: "Pulled", Message: "image pulled",
		},
	)
	var logLines []string
	for i := 1; i <= 15; i++ {
		logLines = append(logLines, fmt.Sprintf("line %d", i))
	}
	var logRequests []string
	c.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "log" {
			return false, nil, nil
		}
		opts := a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions)
		logRequests = append(logRequests, fmt.Sprintf("%s tail=%d", opts.Container, *opts.TailLines))
		// The kubelet honours TailLines; the fake does not, so return what it would.
		return true, &runtime.Unknown{Raw: []byte(strings.Join(logLines[len(logLines)-int(*opts.TailLines):], "\n") + "\n")}, nil
	})

	r := Diagnose(context.Background(), c, ns, []string{"gpu-1"})

	t.Run("only the stuck node is reported, with its taints and GPU labels", func(t *testing.T) {
		if len(r.Nodes) != 1 || r.Nodes[0].Name != "gpu-1" || !r.Nodes[0].Ready {
			t.Fatalf("nodes = %+v, want gpu-1 Ready", r.Nodes)
		}
		n := r.Nodes[0]
		if !slices.Equal(n.Taints, []string{"nvidia.com/gpu=present:NoSchedule"}) {
			t.Errorf("taints = %v", n.Taints)
		}
		if !slices.Equal(n.GPULabels, []string{"feature.node.kubernetes.io/pci-10de.present=true", "nvidia.com/gpu.present=true"}) {
			t.Errorf("gpu labels = %v", n.GPULabels)
		}
		if len(n.Events) != 1 || n.Events[0].Reason != "SystemOOM" {
			t.Errorf("node events = %+v, want the SystemOOM warning", n.Events)
		}
	})

	t.Run("only pods that are not Ready and not Succeeded are reported", func(t *testing.T) {
		if len(r.Pods) != 1 || r.Pods[0].Name != validator.Name {
			t.Fatalf("pods = %+v, want only the stuck validator", r.Pods)
		}
	})

	p := r.Pods[0]
	t.Run("the crash-looping init container is reported with its exit code and restarts", func(t *testing.T) {
		if len(p.InitContainers) != 2 {
			t.Fatalf("init containers = %+v, want driver-validation and toolkit-validation", p.InitContainers)
		}
		ic := p.InitContainers[0]
		if ic.Name != initDriverValidation || ic.State != "waiting" || ic.Reason != "CrashLoopBackOff" ||
			ic.ExitCode == nil || *ic.ExitCode != 1 || ic.Restarts != 5 {
			t.Errorf("driver-validation = %+v", ic)
		}
	})

	t.Run("warning events are merged by reason and message and normal events are left out", func(t *testing.T) {
		if len(p.Events) != 1 || p.Events[0].Reason != "BackOff" || p.Events[0].Count != 7 {
			t.Errorf("pod events = %+v, want one BackOff warning seen 7 times", p.Events)
		}
	})

	t.Run("the last ten log lines of the failing container are read and nothing else", func(t *testing.T) {
		if !slices.Equal(logRequests, []string{"driver-validation tail=10"}) {
			t.Errorf("log requests = %v, want only driver-validation with tail 10", logRequests)
		}
		if got := p.InitContainers[0].Logs; len(got) != 10 || got[0] != "line 6" || got[9] != "line 15" {
			t.Errorf("logs = %v, want lines 6 to 15", got)
		}
	})

	t.Run("the hint names the node whose driver is not ready", func(t *testing.T) {
		h := hintFor(r, "driver-not-ready")
		if h == nil || !slices.Equal(h.Objects, []string{"node gpu-1"}) {
			t.Fatalf("driver-not-ready hint = %+v", h)
		}
		if !strings.Contains(h.Message, "nvidia-driver-ctr") {
			t.Errorf("hint %q does not say which logs to read", h.Message)
		}
	})

	t.Run("the rendering is compact, indented and mentions every fact", func(t *testing.T) {
		s := r.String()
		for _, want := range []string{
			"node gpu-1: Ready\n  taints: nvidia.com/gpu=present:NoSchedule\n",
			"pod gpu-operator/nvidia-operator-validator-x7k2p on gpu-1: Pending\n",
			"  init container driver-validation: waiting CrashLoopBackOff (exit code 1), 5 restarts: back-off 5m0s restarting failed container\n",
			"    last 10 log lines:\n    | line 6\n",
			"  event BackOff (x7): Back-off restarting failed container driver-validation\n",
			"hint: the NVIDIA driver is not ready",
			"  (node gpu-1)\n",
		} {
			if !strings.Contains(s, want) {
				t.Errorf("String() lacks %q:\n%s", want, s)
			}
		}
		if strings.Contains(s, "\x1b[") {
			t.Error("String() contains terminal escape codes")
		}
	})

	t.Run("the report round-trips through JSON", func(t *testing.T) {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Report
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if back.String() != r.String() {
			t.Errorf("JSON round trip changed the report:\n%s\nvs\n%s", back, r)
		}
		if !strings.Contains(string(data), `"initContainers":[{"name":"driver-validation","state":"waiting","reason":"CrashLoopBackOff"`) {
			t.Errorf("JSON lacks the init container state: %s", data)
		}
	})
}

func TestDiagnoseBounds(t *testing.T) {
	t.Run("at most five logs are read however many containers crash", func(t *testing.T) {
		var objs []runtime.Object
		for i := range 8 {
			objs = append(objs, pod(fmt.Sprintf("crasher-%d", i), "gpu-1", corev1.PodRunning, crashing("main", 2)))
		}
		c := fake.NewClientset(objs...)
		r := Diagnose(context.Background(), c, ns, nil)
		withLogs := 0
		for _, p := range r.Pods {
			for _, ct := range p.Containers {
				if len(ct.Logs) > 0 {
					withLogs++
				}
			}
		}
		if withLogs != maxLogs {
			t.Errorf("%d containers have logs, want %d", withLogs, maxLogs)
		}
	})

	t.Run("more than twenty stuck pods are counted, not listed", func(t *testing.T) {
		var objs []runtime.Object
		for i := range 25 {
			objs = append(objs, pod(fmt.Sprintf("pending-%02d", i), "", corev1.PodPending))
		}
		r := Diagnose(context.Background(), fake.NewClientset(objs...), ns, nil)
		if len(r.Pods) != maxPods || r.MorePods != 5 {
			t.Errorf("listed %d pods and %d more, want %d and 5", len(r.Pods), r.MorePods, maxPods)
		}
		if !strings.Contains(r.String(), "… and 5 more pods not ready in gpu-operator") {
			t.Errorf("String() does not count the left-out pods:\n%s", r)
		}
	})

	t.Run("failing log reads and lists are reported, not fatal", func(t *testing.T) {
		c := fake.NewClientset(gpuNode("gpu-1"), pod("crasher", "gpu-1", corev1.PodRunning, crashing("main", 2)))
		c.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return a.GetSubresource() == "log", nil, errors.New("container not found")
		})
		c.PrependReactor("list", "daemonsets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, "", errors.New("no RBAC"))
		})
		r := Diagnose(context.Background(), c, ns, []string{"gpu-1"})
		if len(r.Pods) != 1 || r.Pods[0].Containers[0].LogError == "" {
			t.Errorf("pods = %+v, want the crasher with a log error", r.Pods)
		}
		if len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "list daemonsets in gpu-operator") {
			t.Errorf("errors = %v, want the daemonset list failure", r.Errors)
		}
		if len(r.Nodes) != 1 {
			t.Errorf("nodes = %+v, want gpu-1 despite the other failures", r.Nodes)
		}
	})

	t.Run("a node that does not exist is reported missing", func(t *testing.T) {
		r := Diagnose(context.Background(), fake.NewClientset(gpuNode("gpu-1")), "", []string{"gone"})
		if len(r.Nodes) != 1 || !r.Nodes[0].Missing {
			t.Errorf("nodes = %+v, want gone reported missing", r.Nodes)
		}
		if !strings.Contains(r.String(), "node gone: not found") {
			t.Errorf("String() = %q", r)
		}
	})
}
