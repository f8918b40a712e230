// __NAME__: a Nomad dynamic host volume (DHV) plugin, written by `dhv-conform new`.
//
// Each volume is a plain directory "$DHV_VOLUMES_DIR/$DHV_VOLUME_ID" (mode 0700, like
// Nomad's built-in "mkdir" plugin). Change what create and delete do to make your
// storage; keep the rules below, which `dhv-conform check` holds every plugin to:
//   - stdout carries exactly one JSON answer; every log line goes to stderr;
//   - the environment is cleared (only DHV_* variables): rely on no PATH or HOME;
//   - create is called again for existing volumes (restore, update): return the same
//     path and keep the data; delete may come twice, or for a volume never created;
//   - creates and deletes of other volumes run at the same time;
//   - paths come from DHV_VOLUME_ID alone: never from the name, never from
//     DHV_CREATED_PATH (after a failed state write it is the volumes dir itself);
//   - a failure prints {"error": "..."} and exits 1, and leaves nothing behind.
//
// Build: go build -o __NAME__ .   (the standard library only)
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

const (
	name    = "__NAME__"
	version = "1.0.0"
)

var uuid = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, name+": "+format+"\n", args...)
}

func answer(v any) {
	out, _ := json.Marshal(v)
	fmt.Println(string(out))
}

func fail(message string) {
	logf("error: %s", message)
	answer(map[string]string{"error": message})
	os.Exit(1)
}

func volumePath() string {
	id := os.Getenv("DHV_VOLUME_ID")
	dir := os.Getenv("DHV_VOLUMES_DIR")
	if !uuid.MatchString(id) {
		fail("DHV_VOLUME_ID is not a lower-case UUID")
	}
	if !strings.HasPrefix(dir, "/") {
		fail("DHV_VOLUMES_DIR is not an absolute path")
	}
	return filepath.Join(dir, id)
}

func create() {
	path := volumePath()
	if info, err := os.Stat(path); err != nil || !info.IsDir() {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			fail(fmt.Sprintf("cannot create the volumes directory: %v", err))
		}
		// A concurrent create of the same volume may have made it a moment ago:
		// then it is that call's to finish.
		err := os.Mkdir(path, 0o700)
		if err != nil && !os.IsExist(err) {
			fail(fmt.Sprintf("cannot create the volume directory: %v", err))
		}
		if err == nil {
			// The umask does not matter; a failure removes the (empty) new directory.
			if err := os.Chmod(path, 0o700); err != nil {
				os.Remove(path)
				fail(fmt.Sprintf("cannot set the volume directory's mode: %v", err))
			}
		}
	}
	// Something else at the volume's path (a file) is no volume, and not ours to remove.
	if info, err := os.Stat(path); err != nil || !info.IsDir() {
		fail(fmt.Sprintf("%s exists and is not a directory", path))
	}
	logf("volume ready at %s", path)
	answer(map[string]any{"path": path, "bytes": 0})
}

func remove() {
	path := volumePath()
	if created := os.Getenv("DHV_CREATED_PATH"); created != "" && created != path {
		logf("DHV_CREATED_PATH is not this volume's directory; ignoring it")
	}
	// RemoveAll succeeds when the path is already gone: delete stays idempotent.
	if err := os.RemoveAll(path); err != nil {
		fail(fmt.Sprintf("cannot remove the volume directory: %v", err))
	}
	logf("deleted %s", path)
}

func main() {
	op := ""
	if len(os.Args) > 1 {
		op = os.Args[1]
	}
	switch op {
	case "fingerprint":
		answer(map[string]string{"version": version})
	case "create":
		create()
	case "delete":
		remove()
	case "":
		fail("no operation given (expected fingerprint, create or delete)")
	default:
		fail("unknown operation: " + op)
	}
}
