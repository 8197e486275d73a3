// An L x S grid the user paints with the pointer to build a custom attn_mask. A painted cell means
// "query row may not attend key column" (bool true, or the additive value). The first cell of a
// drag decides whether the drag paints or erases. Cells masked by other means (causal, padding)
// are shown hatched for context but are not part of this mask.
import { cellAt } from './heatmap.js';

const PAINTED = '#f7768e';
const FREE = '#1f2335';
const GRID = '#2c3148';
const OTHER_MASK = 'rgba(169, 177, 214, 0.35)';

export class MaskPainter {
  #canvas;
  #onChange;
  #rows = 0;
  #cols = 0;
  #cells = new Uint8Array(0);
  #context = () => false; // (row, col) -> masked by something else
  #paintValue = null; // 1 or 0 while dragging

  constructor(canvas, onChange) {
    this.#canvas = canvas;
    this.#onChange = onChange;
    canvas.addEventListener('pointerdown', (event) => this.#start(event));
    canvas.addEventListener('pointermove', (event) => this.#move(event));
    canvas.addEventListener('pointerup', () => this.#finish());
    canvas.addEventListener('pointercancel', () => this.#finish());
  }

  get cells() {
    return this.#cells;
  }

  get paintedCount() {
    return this.#cells.reduce((a, b) => a + b, 0);
  }

  // Keeps painted cells that still fit when L or S change.
  resize(rows, cols) {
    if (rows === this.#rows && cols === this.#cols) return;
    const cells = new Uint8Array(rows * cols);
    for (let r = 0; r < Math.min(rows, this.#rows); r++) {
      for (let c = 0; c < Math.min(cols, this.#cols); c++) cells[r * cols + c] = this.#cells[r * this.#cols + c];
    }
    [this.#rows, this.#cols, this.#cells] = [rows, cols, cells];
    this.draw();
  }

  clear() {
    this.#cells.fill(0);
    this.draw();
    this.#onChange();
  }

  setContext(maskedElsewhere) {
    this.#context = maskedElsewhere;
    this.draw();
  }

  draw() {
    const cell = Math.max(6, Math.min(28, Math.floor(420 / Math.max(this.#rows, this.#cols, 1))));
    const canvas = this.#canvas;
    canvas.width = this.#cols * cell + 1;
    canvas.height = this.#rows * cell + 1;
    const g = canvas.getContext('2d');
    g.fillStyle = GRID;
    g.fillRect(0, 0, canvas.width, canvas.height);
    for (let r = 0; r < this.#rows; r++) {
      for (let c = 0; c < this.#cols; c++) {
        const x = c * cell + 1;
        const y = r * cell + 1;
        g.fillStyle = this.#cells[r * this.#cols + c] ? PAINTED : FREE;
        g.fillRect(x, y, cell - 1, cell - 1);
        if (this.#context(r, c)) {
          g.strokeStyle = OTHER_MASK;
          g.beginPath();
          g.moveTo(x, y + cell - 1);
          g.lineTo(x + cell - 1, y);
          g.stroke();
        }
      }
    }
  }

  #paint(event) {
    const hit = cellAt(this.#canvas, event, this.#rows, this.#cols);
    if (!hit) return;
    const index = hit.row * this.#cols + hit.col;
    if (this.#paintValue === null) this.#paintValue = this.#cells[index] ? 0 : 1;
    if (this.#cells[index] === this.#paintValue) return;
    this.#cells[index] = this.#paintValue;
    this.draw();
  }

  #start(event) {
    this.#canvas.setPointerCapture(event.pointerId);
    this.#paintValue = null;
    this.#paint(event);
  }

  #move(event) {
    if (this.#paintValue !== null) this.#paint(event);
  }

  #finish() {
    if (this.#paintValue === null) return;
    this.#paintValue = null;
    this.#onChange();
  }
}
