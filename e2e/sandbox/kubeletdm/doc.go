// Package kubeletdm is the kubelet's device manager for one simulated node of the sandbox, so that
// NVIDIA's real device plugin (github.com/NVIDIA/k8s-device-plugin) can run for a kwok node, which has
// no kubelet. A Manager does the device-plugin half of a kubelet, after
// k8s.io/kubernetes pkg/kubelet/cm/devicemanager at v1.37.2 and the API
// k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1:
//
//   - it serves the v1beta1 Registration service on <Dir>/kubelet.sock, Dir standing for the node's
//     /var/lib/kubelet/device-plugins/; on Register it checks the API version and the resource name,
//     dials the plugin's endpoint socket in Dir, asks GetDevicePluginOptions, and runs ListAndWatch;
//   - each list the plugin sends sets the node's status.capacity (all devices) and
//     status.allocatable (healthy ones) for the plugin's resource name, as the kubelet's node status
//     update does with devicemanager's GetCapacity;
//   - when the plugin's stream ends, its devices are marked unhealthy, so allocatable drops to 0 while
//     capacity stays; five minutes later (devicemanager's endpointStopGracePeriod) capacity drops to 0
//     too, unless the plugin registered again. A new registration for the same resource replaces the
//     old endpoint: NVIDIA's plugin re-registers after a config change, a SIGHUP, or a new
//     kubelet.sock. What ends an endpoint is its stream's end, not its socket's removal: the kubelet watches no
//     socket of a plugin that registered through kubelet.sock (only plugins_registry sockets, through
//     its plugin watcher, plugin/v1beta1/handler.go@v1.37.2). A plugin process that ends closes the
//     connection, and NVIDIA's Stop stops its gRPC server before it removes its socket
//     (internal/plugin/server.go@v0.19.0), so the stream ends either way;
//   - for each pod bound to the node (spec.nodeName) whose containers' limits name a registered
//     resource, it picks devices as devicemanager's devicesToAllocate does (the plugin's
//     GetPreferredAllocation where it offers it), calls the plugin's Allocate per container and
//     resource, keeps the answers (Allocations), and writes them onto the pod for tests to read
//     (AnnotationPrefix, EnvsAnnotation); the devices are free again once the pod has ended or gone.
//
// # The node's status and kwok
//
// The kubelet writes a node's status as a strategic-merge patch of the status subresource
// (k8s.io/component-helpers node/util/status.go@v0.37.2, PatchNodeStatus), under its user agent's
// field manager "kubelet". The Manager does the same with only its resources' keys in
// status.capacity and status.allocatable. kwok keeps them: its node-heartbeat-with-lease stage
// patches only conditions, addresses and daemonEndpoints, and node-initialize, which runs while the
// node is not Ready, writes back whatever capacity and allocatable the node has
// (sigs.k8s.io/kwok kustomize/stage/node@v0.8.0). Both are strategic-merge patches of the status
// subresource (kwok pkg/utils/lifecycle/next.go@v0.8.0, computePatch for a Node), and a
// strategic-merge patch of a resource list touches only the keys it names.
//
// # What it deliberately does not do
//
// No topology manager (no NUMA alignment; devicesToAllocate's "no affinity" path), no checkpoint
// file (allocations do not survive the Manager), no PreStartContainer timing relative to a real
// container start (it is called right after Allocate where the plugin asks for it), no pod
// admission: where the kubelet would reject a pod whose devices cannot be allocated
// (UnexpectedAdmissionError), the Manager writes the error on the pod (ErrorAnnotation) and tries
// again when the plugin next reports its devices. One endpoint per resource: the kubelet of v1.37
// keeps several endpoints of one resource by socket path; here the newest registration wins. The
// node's status is written when the devices change, not re-asserted every 10 s as a kubelet does, so
// something else that rewrites these keys is not corrected until the next change. It neither
// starts nor stops the device plugin.
//
// # Restarts of the plugin
//
// NVIDIA's plugin watches the directory of kubelet.sock with inotify and restarts all its plugins
// when kubelet.sock is created (cmd/nvidia-device-plugin/main.go@v0.19.0), as after a kubelet
// restart. A Manager that starts removes the sockets in Dir, as the kubelet's
// CleanupPluginDirectory does, and creates kubelet.sock anew: a running plugin then re-registers.
// The watch is on the directory itself: if Dir is removed and created again, the plugin's watch is
// gone with the old directory and it never sees the new kubelet.sock, so the caller must keep Dir
// and only restart the Manager in it.
//
// # Who calls it
//
// The sandbox, one Manager per simulated node on which it runs NVIDIA's device plugin, in place of
// the device-plugin stand-in's node status writes (standin/deviceplugin); that wiring is not done
// yet. The package's tests drive it with a device plugin of their own over real unix sockets and a
// fake clientset. Open it when NVIDIA's plugin does not register in the sandbox, a node's GPU
// resources are not what the plugin lists, or a GPU pod does not get the plugin's devices.
package kubeletdm
