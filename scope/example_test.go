package scope_test

import (
	"errors"
	"fmt"
	"slices"

	"github.com/replaybus/replaybus/scope"
)

func ExampleParse() {
	for _, s := range []string{"descendants", "Session", "descendant"} {
		k, err := scope.Parse(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println("ok:", k)
	}
	// Output:
	// ok: descendants
	// scope: unknown scope "Session" (want session, descendants, subtree or all)
	// scope: unknown scope "descendant" (want session, descendants, subtree or all)
}

func ExampleTree() {
	// An agent session with two sub-agents, one of which spawned another.
	var tr scope.Tree[string]
	tr.Add("main", "", "orchestrator")
	tr.Add("research", "main", "sub-agent")
	tr.Add("coder", "main", "sub-agent")
	tr.Add("tests", "coder", "sub-agent")

	var below []string
	tr.Get("main").Walk(func(n *scope.Node[string]) bool {
		below = append(below, n.ID)
		return true
	})
	slices.Sort(below)
	fmt.Println("descendants of main:", below)
	fmt.Println("tests under coder:", tr.Get("tests").IsDescendantOf(tr.Get("coder")))

	err := tr.SetParent("main", "tests")
	fmt.Println(err, errors.Is(err, scope.ErrCycle))

	removed := tr.Remove("coder", true)
	fmt.Println("removed", len(removed), "left", tr.Len())
	// Output:
	// descendants of main: [coder main research tests]
	// tests under coder: true
	// scope: parent would create a cycle: "main" under "tests" true
	// removed 2 left 2
}
