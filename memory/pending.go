package memory

import "fmt"

func notYet(name string) error {
	return fmt.Errorf("memory: policy %q is not available in this build yet", name)
}

func newDeepForcing(Config) (Policy, error) { return nil, notYet(NameDeepForcing) }
func newLongLiveRAG(Config) (Policy, error) { return nil, notYet(NameLongLiveRAG) }
