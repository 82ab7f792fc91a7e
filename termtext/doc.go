// Package termtext makes text from outside (a model's answer, a tool's
// output, an extension, a session's log, a server's reply) inert in a
// terminal. Such text may hold escape sequences that clear the screen, move
// the cursor, set the window title, write the clipboard (OSC 52) or draw a
// hyperlink (OSC 8); 8-bit C1 controls that some terminals honour as CSI
// and OSC; carriage returns that overwrite a line; and bidirectional
// overrides and isolates that make it read differently from what it is.
//
// It has two forms:
//
//   - Strip and StripLine drop all of that. A screen that draws text in its
//     own layout (the TUI) uses them: there is nothing to show but the text.
//   - Visible, VisibleLine and Writer show each such character as a visible
//     stand-in, so that a person reading the output of a command sees what
//     the text holds, and nothing in it acts: an ESC prints as ␛ and the rest
//     of its sequence as the plain characters it is made of.
//
// Neither form ever writes a byte below 0x20 other than newline and tab,
// DEL, a C1 control, a bidirectional control or invalid UTF-8.
package termtext
