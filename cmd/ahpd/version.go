package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func init() {
	register(func() *cobra.Command {
		return newCommand("version", "the version, commit and Go toolchain of this binary (also ahpd --version)", nil, nil,
			func(_ context.Context, pos []string, io cliIO) int {
				if len(pos) > 0 {
					return cmdUsageError(io, "version", errors.New("it takes no arguments"))
				}
				printVersion(io.stdout, version, readBuildInfo())
				return exitOK
			})
	})
}

// releaseVersion is a release's version, set when it is built:
// go build -ldflags "-X main.releaseVersion=v1.2.0" ./cmd/ahpd. Left
// empty, the version is the one the Go toolchain stamped (buildVersion).
var releaseVersion string

// version is ahpd's version as serverInfo, the log and the CLI's
// clientInfo say it.
var version = buildVersion(releaseVersion, readBuildInfo())

// readBuildInfo is the binary's build info, or nil in one built without
// it.
func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// buildVersion is release when set; else the module version the Go
// toolchain gave the build (go install of a tagged version, or a
// pseudo-version from the checkout's commit); else "devel" with the
// commit the checkout was at, "+dirty" when it had changes.
func buildVersion(release string, bi *debug.BuildInfo) string {
	if release != "" {
		return release
	}
	if bi == nil {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, _, modified := vcsOf(bi)
	if rev == "" {
		return "devel"
	}
	v := "devel+" + rev[:min(12, len(rev))]
	if modified {
		v += ".dirty"
	}
	return v
}

// vcsOf is the commit the binary was built from, its time, and whether
// the checkout had changes, as the toolchain stamped them ("" without).
func vcsOf(bi *debug.BuildInfo) (rev, at string, modified bool) {
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	return rev, at, modified
}

// isVersionArg reports whether the arguments ask for the version: ahpd
// --version (ahpd version is a command).
func isVersionArg(args []string) bool {
	return len(args) == 1 && (args[0] == "version" || args[0] == "--version" || args[0] == "-version")
}

// printVersion writes what ahpd version says: the version, and the
// commit, its time and the Go toolchain the binary was built from.
func printVersion(w io.Writer, version string, bi *debug.BuildInfo) {
	var b strings.Builder
	fmt.Fprintf(&b, "ahpd %s\n", version)
	if bi != nil {
		if rev, at, modified := vcsOf(bi); rev != "" {
			if modified {
				rev += " (with uncommitted changes)"
			}
			fmt.Fprintf(&b, "commit  %s\n", rev)
			if at != "" {
				fmt.Fprintf(&b, "date    %s\n", at)
			}
		}
	}
	fmt.Fprintf(&b, "go      %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	_, _ = io.WriteString(w, b.String())
}
