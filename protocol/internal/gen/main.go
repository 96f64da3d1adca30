// Command gen writes the protocol package's wire types and their JSON
// encoding from the official AHP JSON schemas.
//
// It is run by go generate in the protocol package:
//
//	go generate ./protocol
//
// The schemas are read from -schema, else $AHP_SCHEMA_DIR, else
// ../shared/ahp/schema beside the module. The generator copies no text
// from the schemas into the code; doc comments are its own.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	schemaDir := flag.String("schema", "", "directory holding the AHP *.schema.json files")
	outDir := flag.String("out", ".", "directory to write the generated files to")
	flag.Parse()
	if err := run(*schemaDir, *outDir); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(schemaDir, outDir string) error {
	if schemaDir == "" {
		schemaDir = os.Getenv("AHP_SCHEMA_DIR")
	}
	if schemaDir == "" {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		schemaDir = filepath.Join(root, "..", "shared", "ahp", "schema-1.0")
	}
	defs, err := loadSchemas(schemaDir)
	if err != nil {
		return fmt.Errorf("loading schemas (set AHP_SCHEMA_DIR): %w", err)
	}
	home, err := homes(defs)
	if err != nil {
		return err
	}
	for name := range defs {
		if _, ok := home[name]; !ok {
			return fmt.Errorf("$defs.%s belongs to no Go file: make it a root in config.go", name)
		}
	}
	b := newBuilder(defs, home)
	if err := b.build(); err != nil {
		return err
	}
	for _, home := range goFiles {
		types, err := b.emitTypes(home)
		if err != nil {
			return fmt.Errorf("%s types: %w", home, err)
		}
		if err := os.WriteFile(filepath.Join(outDir, home+"_gen.go"), types, 0o644); err != nil {
			return err
		}
		codec, err := b.emitCodec(home)
		if err != nil {
			return fmt.Errorf("%s codec: %w", home, err)
		}
		if err := os.WriteFile(filepath.Join(outDir, home+"_json_gen.go"), codec, 0o644); err != nil {
			return err
		}
	}
	reg, err := loadRegistry(schemaDir, b)
	if err != nil {
		return err
	}
	src, err := b.emitRegistry(reg)
	if err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return os.WriteFile(filepath.Join(outDir, "registry_gen.go"), src, 0o644)
}

// moduleRoot finds the directory holding go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
