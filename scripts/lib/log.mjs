/** Terminal output for the scripts: short, coloured on a TTY, plain otherwise. */
const tty = process.stdout.isTTY && !process.env.NO_COLOR;
const paint = (code) => (s) => (tty ? `\x1b[${code}m${s}\x1b[0m` : String(s));

export const bold = paint('1');
export const dim = paint('2');
export const red = paint('31');
export const green = paint('32');
export const yellow = paint('33');
export const cyan = paint('36');
export const isTTY = Boolean(tty);

export function step(msg) {
  console.log(`${cyan('›')} ${msg}`);
}
export function ok(msg) {
  console.log(`${green('✔')} ${msg}`);
}
export function warn(msg) {
  console.log(`${yellow('!')} ${msg}`);
}
export function error(msg) {
  console.error(`${red('✖')} ${msg}`);
}

/** Error whose message is meant for the user as is (no stack trace). */
export class UserError extends Error {
  constructor(message, exitCode = 1) {
    super(message);
    this.exitCode = exitCode;
  }
}

/** Runs a script's main, turning UserError into a message and an exit code. */
export async function main(fn) {
  try {
    const code = await fn();
    process.exitCode = typeof code === 'number' ? code : 0;
  } catch (e) {
    if (e instanceof UserError) {
      error(e.message);
      process.exitCode = e.exitCode;
    } else {
      console.error(e);
      process.exitCode = 1;
    }
  }
}
