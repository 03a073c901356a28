package docker

import "sort"

// firstArgs is the head of args that a log line carries.
func firstArgs(args []string) []string {
	if len(args) > 6 {
		return args[:6]
	}
	return args
}

// filterArgs renders label filters in key order; an empty value means "present".
func filterArgs(labels map[string]string) []string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		if v := labels[k]; v != "" {
			args = append(args, "--filter", "label="+k+"="+v)
		} else {
			args = append(args, "--filter", "label="+k)
		}
	}
	return args
}
