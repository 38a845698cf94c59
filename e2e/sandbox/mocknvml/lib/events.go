package main

import "C"

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuctl/gpuctl/e2e/sandbox/mocknvml/internal/mockserver"
)

// Event sets, for the device plugin's health check (internal/rm/health.go at v0.19.0): it creates a
// set, registers each device's XID and ECC events on it, and waits on it in a loop, taking
// NVML_ERROR_TIMEOUT as "nothing happened" and any other error as every device unhealthy. So the sets
// here work and never deliver an event: a wait sleeps its timeout (at most a second at a time, so a
// freed set ends it) and times out.

type eventSet struct {
	key   string
	freed atomic.Bool
}

var eventSets atomic.Int64

//export nvmlEventSetCreate
func nvmlEventSetCreate(set *uintptr) int32 {
	return call("nvmlEventSetCreate", func(*mockserver.Server) nvml.Return {
		if set == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		e := &eventSet{key: fmt.Sprintf("eventset/%d", eventSets.Add(1))}
		*set = handles.handle(e.key, e)
		return nvml.SUCCESS
	})
}

func eventSetOf(h uintptr) (*eventSet, nvml.Return) {
	o, _ := handles.object(h)
	e, ok := o.(*eventSet)
	if !ok || e.freed.Load() {
		return nil, nvml.ERROR_INVALID_ARGUMENT
	}
	return e, nvml.SUCCESS
}

//export nvmlEventSetFree
func nvmlEventSetFree(set uintptr) int32 {
	return call("nvmlEventSetFree", func(*mockserver.Server) nvml.Return {
		e, r := eventSetOf(set)
		if r != nvml.SUCCESS {
			return r
		}
		e.freed.Store(true)
		handles.release(e.key, set)
		return nvml.SUCCESS
	})
}

//export nvmlDeviceRegisterEvents
func nvmlDeviceRegisterEvents(device uintptr, eventTypes uint64, set uintptr) int32 {
	return onDevice("nvmlDeviceRegisterEvents", device, func(d nvml.Device) nvml.Return {
		if _, r := eventSetOf(set); r != nvml.SUCCESS {
			return r
		}
		supported, r := d.GetSupportedEventTypes()
		if r != nvml.SUCCESS {
			return r
		}
		if eventTypes&^supported != 0 {
			return nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.SUCCESS
	})
}

func eventSetWait(name string, set uintptr, data unsafe.Pointer, timeoutMs uint32) int32 {
	e, r := eventSetOf(set)
	if r != nvml.SUCCESS || current() == nil {
		return call(name, func(*mockserver.Server) nvml.Return { return nvml.ERROR_INVALID_ARGUMENT })
	}
	deadline := time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
	for !e.freed.Load() && time.Now().Before(deadline) {
		time.Sleep(min(time.Second, time.Until(deadline)))
	}
	logCall(name, nvml.ERROR_TIMEOUT, "")
	return ret(nvml.ERROR_TIMEOUT)
}

//export nvmlEventSetWait
func nvmlEventSetWait(set uintptr, data unsafe.Pointer, timeoutMs uint32) int32 {
	return eventSetWait("nvmlEventSetWait", set, data, timeoutMs)
}

//export nvmlEventSetWait_v2
func nvmlEventSetWait_v2(set uintptr, data unsafe.Pointer, timeoutMs uint32) int32 {
	return eventSetWait("nvmlEventSetWait_v2", set, data, timeoutMs)
}
