package tool

// Coding returns the built-in coding tools, for a kernel to add next to
// Builtins: shell (run with the limits of shell), read_file, write_file,
// edit_file, list_files, glob and grep. Every one of them is a
// WorkspaceSubjecter, so consent rules can match its command or path.
func Coding(shell Shell) []Tool {
	return []Tool{
		shell,
		ReadFile{},
		WriteFile{},
		EditFile{},
		ListFiles{},
		Glob{},
		Grep{},
	}
}
