package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
)

// Memory workloads (W4, W7) run each measurement in a fresh child process
// of this program: a process that already ran other workloads keeps freed
// goroutine descriptors and stacks in runtime pools, and new goroutines
// reuse them, which would hide part of a system's cost.

type childResult struct {
	A, B float64
	Err  string
}

// childMain runs one memory measurement when this process is a child; it
// reports whether it was.
func childMain() bool {
	if len(os.Args) != 5 || os.Args[1] != "-child" {
		return false
	}
	kind, name := os.Args[2], os.Args[3]
	n, _ := strconv.Atoi(os.Args[4])
	var res childResult
	var err error
	if name == "floor" {
		res.A, res.B = floorParkedGoroutines(n)
	} else {
		i := slices.IndexFunc(systems, func(s System) bool { return s.Name == name })
		if i < 0 {
			err = fmt.Errorf("unknown system %q", name)
		} else if kind == "W4" {
			res.A, res.B, err = runW4(systems[i], n)
		} else {
			res.A, res.B, err = runW7(systems[i], n)
		}
	}
	if err != nil {
		res.Err = err.Error()
	}
	_ = json.NewEncoder(os.Stdout).Encode(res)
	return true
}

func inChild(kind, name string, n int) (a, b float64, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(exe, "-child", kind, name, strconv.Itoa(n))
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%s %s child: %v: %s", kind, name, err, errOut.String())
	}
	var res childResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return 0, 0, fmt.Errorf("%s %s child: %v: %q", kind, name, err, out.String())
	}
	if res.Err != "" {
		return 0, 0, fmt.Errorf("%s", res.Err)
	}
	return res.A, res.B, nil
}
