import { type AgentState } from '../state/agent-state.js';
import { parseKeys } from './keys.js';
import { type DashboardView, renderDashboard } from './render.js';

const ALT_SCREEN_ON = '\x1b[?1049h';
const ALT_SCREEN_OFF = '\x1b[?1049l';
const CURSOR_HIDE = '\x1b[?25l';
const CURSOR_SHOW = '\x1b[?25h';
const HOME = '\x1b[H';
const CLEAR_LINE = '\x1b[K';
const CLEAR_BELOW = '\x1b[J';

/**
 * Drives the dashboard on a terminal: the alternate screen, a redraw every second (and on
 * resize or a key), raw-mode keys. The picture itself is renderDashboard()'s.
 */
export class TerminalDashboard {
  private view: DashboardView = { mode: 'main', selected: 0 };
  private timer?: NodeJS.Timeout;
  private started = false;
  private readonly onData = (chunk: Buffer) => this.keys(chunk.toString('utf8'));
  private readonly onResize = () => this.draw();
  private readonly restore = () => this.stop();

  constructor(
    private readonly state: AgentState,
    private readonly out: NodeJS.WriteStream,
    private readonly input: NodeJS.ReadStream,
    private readonly onQuit: () => void,
  ) {}

  start() {
    if (this.started) return;
    this.started = true;
    this.out.write(ALT_SCREEN_ON + CURSOR_HIDE);
    if (this.input.isTTY) this.input.setRawMode(true);
    this.input.on('data', this.onData);
    this.input.resume();
    this.out.on('resize', this.onResize);
    // However the process ends, give the terminal back as it was.
    process.on('exit', this.restore);
    this.timer = setInterval(() => this.draw(), 1000);
    this.timer.unref();
    this.draw();
  }

  stop() {
    if (!this.started) return;
    this.started = false;
    clearInterval(this.timer);
    this.input.off('data', this.onData);
    this.out.off('resize', this.onResize);
    process.off('exit', this.restore);
    if (this.input.isTTY) this.input.setRawMode(false);
    this.input.pause();
    this.out.write(CURSOR_SHOW + ALT_SCREEN_OFF);
  }

  private keys(chunk: string) {
    const containers = this.state.containerRows();
    for (const key of parseKeys(chunk)) {
      if (key === 'quit') {
        this.onQuit();
        return;
      }
      if (this.view.mode === 'logs') {
        if (key === 'back' || key === 'logs') this.view = { mode: 'main', selected: this.view.selected };
        continue;
      }
      if (key === 'up') this.view.selected = Math.max(0, this.view.selected - 1);
      if (key === 'down') this.view.selected = Math.min(Math.max(0, containers.length - 1), this.view.selected + 1);
      if (key === 'logs' && containers[this.view.selected]) {
        this.view = { mode: 'logs', selected: this.view.selected, logContainerId: containers[this.view.selected].id };
      }
    }
    this.draw();
  }

  draw() {
    if (!this.started) return;
    const view = this.view.mode === 'logs' ? { ...this.view, logLines: this.state.containerLog(this.view.logContainerId!) } : this.view;
    const frame = renderDashboard(
      this.state.snapshot(),
      view,
      { width: this.out.columns ?? 80, height: this.out.rows ?? 24 },
      { color: true },
    );
    this.out.write(HOME + frame.split('\n').join(`${CLEAR_LINE}\n`) + CLEAR_LINE + CLEAR_BELOW);
  }
}
