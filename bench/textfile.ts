// Writes big generated rule files line by line, in chunks (a 100k-service
// ruleset is hundreds of MB: more than one JS string should hold).
import { closeSync, openSync, writeSync } from 'node:fs';

export class LineFile {
  readonly path: string;
  readonly #fd: number;
  #buf: string[] = [];
  #size = 0;
  lines = 0;
  bytes = 0;

  constructor(path: string) {
    this.path = path;
    this.#fd = openSync(path, 'w', 0o600);
  }

  line(s: string): void {
    this.#buf.push(s);
    this.#size += s.length + 1;
    this.lines++;
    if (this.#size > 1 << 20) this.#flush();
  }

  #flush(): void {
    if (this.#buf.length === 0) return;
    const chunk = `${this.#buf.join('\n')}\n`;
    this.bytes += Buffer.byteLength(chunk);
    writeSync(this.#fd, chunk);
    this.#buf = [];
    this.#size = 0;
  }

  close(): void {
    this.#flush();
    closeSync(this.#fd);
  }
}

/** Writes a file from a generator of lines; returns its line count. */
export function writeLines(path: string, gen: (out: LineFile) => void): { lines: number; bytes: number } {
  const f = new LineFile(path);
  try {
    gen(f);
  } finally {
    f.close();
  }
  return { lines: f.lines, bytes: f.bytes };
}
