package acp

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/ahpd/ahpd/plugins"
)

// codeResourceNotFound is ACP's error code for a file that does not
// exist; the SDK has no helper for it.
const codeResourceNotFound = -32002

// ReadTextFile serves fs/read_text_file: a text file beneath the working
// directory, or the lines of it the request asks for.
func (c *client) ReadTextFile(ctx context.Context, req sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	if err := c.denied(plugins.ToolCall{Name: plugins.KindRead, Kind: plugins.KindRead, Paths: []string{req.Path}}); err != nil {
		return sdk.ReadTextFileResponse{}, err
	}
	rel, err := c.resolve(req.Path)
	if err != nil {
		return sdk.ReadTextFileResponse{}, err
	}
	data, err := c.root.ReadFile(rel)
	if err != nil {
		return sdk.ReadTextFileResponse{}, fileError(req.Path, err)
	}
	content, err := lineRange(string(data), req.Line, req.Limit)
	if err != nil {
		return sdk.ReadTextFileResponse{}, err
	}
	return sdk.ReadTextFileResponse{Content: content}, nil
}

// WriteTextFile serves fs/write_text_file: the file beneath the working
// directory is created, with its missing parents, or replaced.
//
// The SDK refuses a request with empty content before it gets here, so
// an agent cannot empty a file this way.
func (c *client) WriteTextFile(ctx context.Context, req sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	if err := c.denied(plugins.ToolCall{Name: plugins.KindEdit, Kind: plugins.KindEdit, Paths: []string{req.Path}}); err != nil {
		return sdk.WriteTextFileResponse{}, err
	}
	rel, err := c.resolve(req.Path)
	if err != nil {
		return sdk.WriteTextFileResponse{}, err
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := c.root.MkdirAll(dir, 0o755); err != nil {
			return sdk.WriteTextFileResponse{}, fileError(req.Path, err)
		}
	}
	if err := c.root.WriteFile(rel, []byte(req.Content), 0o644); err != nil {
		return sdk.WriteTextFileResponse{}, fileError(req.Path, err)
	}
	return sdk.WriteTextFileResponse{}, nil
}

// resolve returns path relative to the resolved working directory, or a
// JSON-RPC error if it is not beneath it. A relative path is taken
// relative to the working directory. Symlinks in the part of the path
// that exists are resolved first, so a link cannot lead out; the files
// are then opened through an os.Root, so a link swapped in afterwards
// cannot either.
func (c *client) resolve(path string) (string, error) {
	if path == "" {
		return "", sdk.NewInvalidParams(map[string]any{"error": "empty path"})
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.dirs[0], path)
	}
	full, err := resolveExisting(filepath.Clean(path))
	if err != nil {
		return "", refused(path, err.Error())
	}
	rel, ok := inside(c.dirs[1], full)
	if !ok {
		return "", refused(path, "outside the session's working directory")
	}
	return rel, nil
}

// resolveExisting resolves the symlinks of the longest part of path that
// exists and appends the rest. A dangling symlink is an error: where it
// would lead is not known until it is written.
func resolveExisting(path string) (string, error) {
	existing, rest := path, ""
	for {
		real, err := filepath.EvalSymlinks(existing)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if _, err := os.Lstat(existing); err == nil {
			return "", errors.New("the path leads through a dangling symlink")
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return "", err
		}
		rest = filepath.Join(filepath.Base(existing), rest)
		existing = parent
	}
}

// inside returns path relative to dir if path is dir or beneath it.
func inside(dir, path string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

func refused(path, why string) error {
	return sdk.NewInvalidParams(map[string]any{"path": path, "error": why})
}

// fileError turns a file system error into the JSON-RPC error the agent
// gets.
func fileError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return &sdk.RequestError{Code: codeResourceNotFound, Message: "Resource not found", Data: map[string]any{"path": path}}
	}
	return sdk.NewInternalError(map[string]any{"path": path, "error": err.Error()})
}

// lineRange returns limit lines of content from the 1-based line on;
// nil means from the first line, and all of them.
func lineRange(content string, line, limit *int) (string, error) {
	if line == nil && limit == nil {
		return content, nil
	}
	start := 0
	if line != nil {
		if *line < 1 {
			return "", sdk.NewInvalidParams(map[string]any{"error": "line numbers start at 1"})
		}
		start = *line - 1
	}
	lines := strings.SplitAfter(content, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if start >= len(lines) {
		return "", nil
	}
	lines = lines[start:]
	if limit != nil {
		if *limit < 0 {
			return "", sdk.NewInvalidParams(map[string]any{"error": "negative limit"})
		}
		lines = lines[:min(*limit, len(lines))]
	}
	return strings.Join(lines, ""), nil
}
