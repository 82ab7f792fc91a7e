package tui

// ReversedCells writes the cells of a drawing in reverse video between ⟦
// and ⟧, every other escape sequence removed: the black-box tests read
// where the cursor is with it.
var ReversedCells = reversedCells
