package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml/internal/mockserver"
)

// registry hands out NVML handles: one byte of C memory per object identity (a GPU's or MIG device's
// UUID, a GPU instance's GPU and ID, …), kept for the life of the process so that a handle stays the
// same across nvmlInit calls, and the object of the current server each handle stands for.
type registry struct {
	mu      sync.Mutex
	byKey   map[string]unsafe.Pointer
	objects map[uintptr]any
	byObj   map[any]uintptr
}

var handles = &registry{byKey: map[string]unsafe.Pointer{}, objects: map[uintptr]any{}, byObj: map[any]uintptr{}}

// handle returns key's handle, allocating it the first time, and binds it to obj.
func (r *registry) handle(key string, obj any) uintptr {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.byKey[key]
	if !ok {
		p = C.malloc(1)
		r.byKey[key] = p
	}
	h := uintptr(p)
	r.objects[h], r.byObj[obj] = obj, h
	return h
}

// release frees a handle made for an object that goes away (an event set).
func (r *registry) release(key string, h uintptr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.byKey[key]
	if !ok || uintptr(p) != h {
		return
	}
	delete(r.byKey, key)
	delete(r.byObj, r.objects[h])
	delete(r.objects, h)
	C.free(p)
}

// rebind binds every handle to the objects of a newly read server: handles of objects it has no
// more answer NVML_ERROR_INVALID_ARGUMENT.
func (r *registry) rebind(s *mockserver.Server) {
	r.mu.Lock()
	r.objects, r.byObj = map[uintptr]any{}, map[any]uintptr{}
	r.mu.Unlock()
	for _, g := range s.GPUs() {
		r.handle("gpu/"+g.UUID, g.Device)
		for _, m := range g.MIGDevices() {
			gi, ci := m.GpuInstance(), m.ComputeInstance()
			giKey := fmt.Sprintf("gi/%s/%d", g.UUID, gi.Info.Id)
			r.handle("mig/"+m.UUID(), m)
			r.handle(giKey, gi)
			r.handle(fmt.Sprintf("%s/ci/%d", giKey, ci.Info.Id), ci)
		}
	}
}

// object is what handle h stands for now.
func (r *registry) object(h uintptr) (any, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.objects[h]
	return o, ok
}

// handleOf is the handle of an object of the current server.
func (r *registry) handleOf(obj any) (uintptr, nvml.Return) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.byObj[obj]
	if !ok {
		return 0, nvml.ERROR_UNKNOWN
	}
	return h, nvml.SUCCESS
}

func device(h uintptr) (nvml.Device, nvml.Return) {
	o, _ := handles.object(h)
	d, ok := o.(nvml.Device)
	if !ok {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return d, nvml.SUCCESS
}

func gpuInstance(h uintptr) (nvml.GpuInstance, nvml.Return) {
	o, _ := handles.object(h)
	gi, ok := o.(nvml.GpuInstance)
	if !ok {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return gi, nvml.SUCCESS
}

func computeInstance(h uintptr) (nvml.ComputeInstance, nvml.Return) {
	o, _ := handles.object(h)
	ci, ok := o.(nvml.ComputeInstance)
	if !ok {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return ci, nvml.SUCCESS
}

// putHandle writes obj's handle to the caller's nvmlDevice_t* (or instance) out parameter.
func putHandle(out *uintptr, obj any) nvml.Return {
	if out == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	h, r := handles.handleOf(obj)
	if r == nvml.SUCCESS {
		*out = h
	}
	return r
}
