export class ContainerRuntimeError extends Error {
  constructor(
    message: string,
    readonly containerId?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class InvalidContainerSpecError extends ContainerRuntimeError {}

export class ContainerNotFoundError extends ContainerRuntimeError {
  constructor(id: string) {
    super(`container ${id} is not managed by this runtime`, id);
  }
}

export class ContainerExistsError extends ContainerRuntimeError {
  constructor(id: string) {
    super(`container ${id} already exists`, id);
  }
}

/** The process never ran: bad image, bad args, runc refused the config. `output` is the tail of what it wrote. */
export class ContainerStartError extends ContainerRuntimeError {
  constructor(
    id: string,
    message: string,
    readonly output: string,
  ) {
    super(`container ${id} failed to start: ${message}${output ? `\n${output}` : ''}`, id);
  }
}

export class ImageError extends Error {
  constructor(
    readonly ref: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`image ${ref}: ${message}`, options);
    this.name = 'ImageError';
  }
}
